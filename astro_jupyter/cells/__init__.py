"""How an ``%astro`` call looks in a notebook cell: its argument syntax and its rendered result.

Shared by the kernel (live magics), ``export.py`` (a session written out as a notebook) and
the CLI, so none of those imports another front end to get them. Pure Python: nothing here
imports IPython or Jupyter.
"""
