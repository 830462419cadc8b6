"""``python -m astro_jupyter.host``: the agent host process (see ``process.py``)."""

import sys

from .process import main

sys.exit(main())
