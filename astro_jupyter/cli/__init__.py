"""``astro-jupyter``: the agent and its tools from a terminal (headless use, scripts, CI).

A thin front end: each command parses its arguments, calls the application layer
(``astro_jupyter.app``) and prints what it returns. One module per command group:
``ask`` (a run), ``tools`` (``tool``, ``tools``), ``sessions``, ``library``, ``export``,
``demo``, ``doctor``; the registry and shared plumbing are in ``registry.py``.

Exit codes (as the README says): 0 ok, 1 a tool or run error or a bad argument (a usage error, a
blank or too long prompt), 2 no LLM endpoint configured/reachable, 3 the answer was cut off, 130
cancelled by Ctrl-C.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import sys

from .registry import COMMANDS, EXIT_CANCELLED, EXIT_ERROR, EXIT_OK, EXIT_UNAVAILABLE, command, err
from . import ask as _ask  # noqa: F401 - registered first: `ask` leads the --help list
from .tools import tool_arguments

__all__ = ["COMMANDS", "COMMAND_MODULES", "EXIT_CANCELLED", "EXIT_ERROR", "EXIT_OK", "EXIT_UNAVAILABLE",
           "build_parser", "command", "err", "main", "tool_arguments"]

# Modules that register subcommands with ``@command`` when imported (in `--help` order).
COMMAND_MODULES: tuple[str, ...] = (
    "astro_jupyter.cli.ask", "astro_jupyter.cli.tools", "astro_jupyter.cli.sessions", "astro_jupyter.cli.doctor",
    "astro_jupyter.cli.library", "astro_jupyter.cli.demo", "astro_jupyter.cli.export",
    "astro_jupyter.cli.acp",  # ACP agent (docs/acp.md)
    "astro_jupyter.cli.mcp",
)


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush does not raise again."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def build_parser() -> argparse.ArgumentParser:
    for module in COMMAND_MODULES:
        importlib.import_module(module)
    from .._version import __version__

    parser = argparse.ArgumentParser(prog="astro-jupyter", description="A research agent for astronomers (headless use).")
    parser.add_argument("--version", action="version", version=f"astro-jupyter {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for cmd in COMMANDS.values():
        cmd.configure(sub.add_parser(cmd.name, help=cmd.help, description=cmd.help))
    return parser


def main(argv: list[str] | None = None) -> int:
    for stream in (sys.stdout, sys.stderr):  # text a terminal cannot encode is shown escaped, never a traceback
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits 2 on a usage error; 2 is "no LLM endpoint" here
        return EXIT_ERROR if exc.code == 2 else int(exc.code or 0)
    if not args.command:
        parser.print_help()
        return EXIT_ERROR
    from ..errors import AstroError

    try:
        return asyncio.run(COMMANDS[args.command].handler(args))
    except KeyboardInterrupt:
        return EXIT_CANCELLED
    except BrokenPipeError:
        # the reader went away (`astro-jupyter tools --json | head`): stop quietly, as cat does
        _silence_stdout()
        return EXIT_OK
    except AstroError as exc:
        err(str(exc))
        return EXIT_ERROR
