"""Small helpers every resource of the application layer shares (visibility, wire encoding)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..textsafe import safe_json

if TYPE_CHECKING:
    import asyncio

    from ..config import AstroConfig
    from ..services.container import ServiceContainer


def can_see(row_owner: str, owner: str) -> bool:
    """Ownership: an owner sees its own rows and ownerless ones (made by the kernel or the CLI)."""
    return row_owner in ("", owner)


def encode_wire(data: dict[str, Any]) -> str:
    """Compact JSON without raw newlines (safe as one SSE ``data:`` line), always UTF-8 encodable."""
    return safe_json(data)


def unique(items: list[str]) -> list[str]:
    """The non-empty items in first-seen order."""
    seen: dict[str, None] = {}
    for item in items:
        if item:
            seen.setdefault(item, None)
    return list(seen)


# The caller's identity: a Jupyter owner key ("" = the shared single-user identity), or None for
# the local user of a CLI command or a kernel, who holds the database file and sees every row.
Owner = str | None


def visible_to(row_owner: str, owner: Owner) -> bool:
    """``can_see`` that also accepts the local user (``None``)."""
    return owner is None or can_see(row_owner, owner)


def may_change(row_owner: str, owner: Owner) -> bool:
    """Changing a row (a run in a session, which inherits its "always" answers; rename, delete,
    cancel, answer a question) is for its owner alone: a named identity sees the ownerless rows
    but does not act in them. The local user (``None``) holds the database and may."""
    return owner is None or row_owner == owner


class AppBase:
    """What every resource mixin of ``AstroApp`` relies on (set by ``AstroApp.__init__``)."""

    config: "AstroConfig"
    services: "ServiceContainer"
    source: str
    _runtime: Any
    _owner_models: dict[str, str]
    _start_run_lock: "asyncio.Lock"

    @property
    def runtime(self) -> Any:  # pragma: no cover - AstroApp overrides it
        raise NotImplementedError
