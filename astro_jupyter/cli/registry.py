"""The CLI's command registry and the plumbing every command shares (exit codes, errors, the app).

Each subcommand is one ``@command`` function: a name, a help line, a function adding its
arguments, and an async handler returning the exit code. A module of this package adds its
subcommands by being listed in ``COMMAND_MODULES`` (``__init__.py``), so features never need to
rewrite the entry point.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, AsyncIterator, Awaitable, Callable

if TYPE_CHECKING:
    from ..app import AstroApp
    from ..config import AstroConfig

EXIT_OK, EXIT_ERROR, EXIT_UNAVAILABLE, EXIT_CANCELLED = 0, 1, 2, 130
EXIT_TRUNCATED = 3  # the run finished, but its answer stopped at the model's output bound

Handler = Callable[[argparse.Namespace], Awaitable[int]]
Configure = Callable[[argparse.ArgumentParser], None]


@dataclass
class Command:
    name: str
    help: str
    configure: Configure
    handler: Handler


COMMANDS: dict[str, Command] = {}


def command(name: str, help: str, configure: Configure | None = None) -> Callable[[Handler], Handler]:
    def register(handler: Handler) -> Handler:
        COMMANDS[name] = Command(name, help, configure or (lambda p: None), handler)
        return handler

    return register


def json_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="machine-readable JSON output")


def make_config() -> "AstroConfig":
    from ..config import AstroConfig

    return AstroConfig()


def make_app(config: "AstroConfig | None" = None) -> "AstroApp":
    """The application layer of one command (source "cli"; the local user sees every session)."""
    from ..app import AstroApp

    return AstroApp(config or make_config(), source="cli")


@contextlib.asynccontextmanager
async def open_app(config: "AstroConfig | None" = None) -> AsyncIterator["AstroApp"]:
    """A started app, closed (runs cancelled, store closed) when the command ends."""
    app = make_app(config)
    try:
        await app.start()
        yield app
    finally:
        await app.close()


def err(message: str) -> None:
    print(f"astro-jupyter: {message}", file=sys.stderr, flush=True)
