"""``python -m astro_jupyter.cli``: the ``astro-jupyter`` console script."""

import sys

from astro_jupyter.cli import main

if __name__ == "__main__":  # importing this module (a scan of the package) runs nothing
    sys.exit(main())
