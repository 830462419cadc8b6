"""``python -m astro_jupyter.host``: the agent host process (see ``process.py``)."""

import sys

from .process import main

if __name__ == "__main__":  # importing this module (a scan of the package) runs nothing
    sys.exit(main())
