"""Data tools: catalogs over TAP, the sky, BibTeX (one module per tool family)."""
