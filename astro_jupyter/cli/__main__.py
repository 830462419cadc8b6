"""``python -m astro_jupyter.cli``: the ``astro-jupyter`` console script."""

import sys

from astro_jupyter.cli import main

sys.exit(main())
