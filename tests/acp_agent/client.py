"""A recording ACP client written with the SDK's client side (what an editor does, minus the UI)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Callable

from acp.schema import (
    AllowedOutcome,
    DeniedOutcome,
    ReadTextFileResponse,
    RequestPermissionResponse,
    WriteTextFileResponse,
)


class RecordingClient:
    """Records every update and question; answers permissions with ``choose(options) -> option_id | None``
    (None: dismiss), or never when ``choose`` is ``"never"``; serves fs requests from ``files`` on disk."""

    def __init__(self, choose: Callable[[list[Any]], str | None] | str = lambda opts: "allow",
                 buffers: dict[str, str] | None = None) -> None:
        self.choose = choose
        self.buffers = buffers or {}  # path → unsaved editor text, served instead of the disk
        self.updates: list[Any] = []
        self.questions: list[tuple[Any, list[Any]]] = []
        self.reads: list[str] = []
        self.writes: list[tuple[str, str]] = []
        self.changed = asyncio.Event()

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append(update)
        self.changed.set()

    async def request_permission(self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any) -> Any:
        self.questions.append((tool_call, options))
        self.changed.set()
        if self.choose == "never":
            await asyncio.Event().wait()
        chosen = self.choose(options)  # type: ignore[operator]
        if chosen is None:
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=chosen))

    async def read_text_file(self, session_id: str, path: str, line: int | None = None, limit: int | None = None,
                             **kwargs: Any) -> ReadTextFileResponse:
        self.reads.append(path)
        return ReadTextFileResponse(content=self.buffers.get(path) or Path(path).read_text())

    async def write_text_file(self, session_id: str, path: str, content: str, **kwargs: Any) -> WriteTextFileResponse:
        self.writes.append((path, content))
        if path in self.buffers:
            self.buffers[path] = content
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(content)
        return WriteTextFileResponse()

    async def wait_for(self, predicate: Callable[[], bool], timeout: float = 30) -> None:
        async def loop() -> None:
            while not predicate():
                self.changed.clear()
                await self.changed.wait()
        await asyncio.wait_for(loop(), timeout)

    def of(self, kind: str) -> list[Any]:
        return [u for u in self.updates if u.session_update == kind]

    def text(self, kind: str = "agent_message_chunk") -> str:
        return "".join(u.content.text for u in self.of(kind))
