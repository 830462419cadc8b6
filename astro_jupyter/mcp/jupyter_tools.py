"""Our read-only tools for Jupyter's own MCP server (``jupyter_server_mcp``, which jupyter-ai runs).

That extension discovers tools through the ``jupyter_server_mcp.tools`` entry point: a list of
``"module:function"`` strings, each a Python function whose signature becomes the tool's schema.
``TOOLS`` names one function per exposed read-only tool; each function is made on first lookup
(module ``__getattr__``) from the tool's JSON schema, and runs the tool like ``astro-jupyter mcp``
does: through the executor, stored as a session. Writes are never offered here (no flag to ask for them).
"""

from __future__ import annotations

import asyncio
import inspect
from typing import TYPE_CHECKING, Annotated, Any, Callable

from .exposed import exposed_tools

if TYPE_CHECKING:
    from ..app.core import AstroApp

_JSON_TYPES: dict[str, Any] = {"string": str, "integer": int, "number": float, "boolean": bool, "array": list,
                               "object": dict}
_state: dict[str, Any] = {}


def _app() -> "AstroApp":
    """The one application layer of these functions in this process (built on first use)."""
    app = _state.get("app")
    if app is None:
        from ..app import AstroApp
        from ..config import AstroConfig

        app = _state["app"] = AstroApp(AstroConfig(), source="mcp")
    return app


def _registry() -> Any:
    registry = _state.get("registry")
    if registry is None:
        from ..app.tools import standard_registry

        registry = _state["registry"] = standard_registry(_app().config)
    return registry


def _names() -> list[str]:
    return list(exposed_tools(_registry(), allow_writes=False))


def TOOLS() -> list[str]:  # noqa: N802 - the name the entry point documents
    """The entry point's value: ``module:function`` of each read-only tool."""
    return [f"{__name__}:{name}" for name in _names()]


def _signature(schema: dict[str, Any]) -> inspect.Signature:
    from pydantic import Field

    props, required = schema.get("properties") or {}, set(schema.get("required") or ())
    params = []
    for key in sorted(props, key=lambda k: k not in required):  # required first, as Python wants
        spec = props[key] if isinstance(props[key], dict) else {}
        kind = _JSON_TYPES.get(spec.get("type"), Any) if isinstance(spec.get("type"), str) else Any
        annotation: Any = Annotated[kind, Field(description=spec.get("description") or "")]
        default = inspect.Parameter.empty if key in required else None
        if key not in required:
            annotation = Annotated[kind | None, Field(description=spec.get("description") or "")]
        params.append(inspect.Parameter(key, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation))
    return inspect.Signature(params, return_annotation=str)


def _function(name: str) -> Callable[..., Any]:
    tool = _registry().get(name)
    lock = asyncio.Lock()

    async def call(**kwargs: Any) -> str:
        app = _app()
        async with lock:
            await app.start()
        arguments = {k: v for k, v in kwargs.items() if v is not None}
        run, _ = await app.run_tool_as_session(name, arguments, source="mcp", title_prefix="MCP")
        if run.is_error:
            raise RuntimeError(run.content)
        return run.content

    call.__name__ = call.__qualname__ = name
    call.__doc__ = tool.description
    call.__signature__ = _signature(tool.parameters)  # type: ignore[attr-defined]
    call.__annotations__ = {p.name: p.annotation for p in call.__signature__.parameters.values()}  # type: ignore[attr-defined]
    call.__annotations__["return"] = str
    return call


def __getattr__(name: str) -> Callable[..., Any]:
    if not name.startswith("_") and name in _names():
        function = _function(name)
        globals()[name] = function
        return function
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
