"""Data tools: catalogs over TAP (``tap``), an object's literature (``object_papers``), BibTeX (``bibtex``)."""
