"""``astro-jupyter export SESSION -o FILE``: a stored session as a research-log notebook, and its BibTeX
(``FILE`` with ``.bib``) with every paper the answers cite."""

from __future__ import annotations

import argparse

from .registry import EXIT_ERROR, EXIT_OK, command, err, open_app


def _export_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("session", help="session id (see `astro-jupyter sessions`)")
    p.add_argument("-o", "--output", help="notebook to write (default: astro-SESSION.ipynb)")


@command("export", "export a session as a Jupyter notebook research log", _export_args)
async def cmd_export(args: argparse.Namespace) -> int:
    from ..errors import AstroError

    async with open_app() as app:
        try:
            log = await app.write_session_notebook(None, args.session, args.output or f"astro-{args.session}.ipynb")
        except AstroError as exc:
            err(str(exc))
            return EXIT_ERROR
        except OSError as exc:
            err(f"cannot write the notebook: {exc}")
            return EXIT_ERROR
    for problem in log.problems:
        err(f"bibliography: {problem}")
    print(log.notebook)
    print(log.bibtex)
    return EXIT_OK
