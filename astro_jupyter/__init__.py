"""astro-jupyter: a research agent for astronomers that lives inside Jupyter.

This module stays import-light on purpose: ``%load_ext astro_jupyter`` and the
server-extension discovery both import it, so heavy modules (openai, pymupdf,
numpy) are only imported by the functions that need them.
"""

from __future__ import annotations

from typing import Any

from ._version import __version__

__all__ = ["__version__", "load_ipython_extension", "unload_ipython_extension"]


def _jupyter_labextension_paths() -> list[dict[str, str]]:
    return [{"src": "labextension", "dest": "astro-jupyter"}]


def _jupyter_server_extension_points() -> list[dict[str, Any]]:
    from .server.app import AstroExtensionApp

    return [{"module": "astro_jupyter.server.app", "app": AstroExtensionApp}]


def load_ipython_extension(ipython: Any) -> None:
    """Entry point of ``%load_ext astro_jupyter``: registers the ``%astro`` magics."""
    from .kernel.magics import load_ipython_extension as _load

    _load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    from .kernel.magics import unload_ipython_extension as _unload

    _unload(ipython)
