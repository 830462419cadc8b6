"""The server's application layer: sidebar runs live in the agent host, a process of its own.

``HostedAstroApp`` is the server's ``AstroApp`` with the runtime moved out: starting,
following, cancelling and answering a run are requests to the agent host (``host/``), which
applies the ownership rules itself (every request names the owner this server authenticated).
Everything that needs no runtime (sessions, history, search, papers, notes, stored events of
finished runs) is served here from SQLite, as before: WAL readers do not wait for the host.

When the host dies, its runs are closed in the store (an ``error`` and a ``done`` numbered
after every id a watcher can have seen: ``AstroApp.close_orphaned_runs``) and every open
event stream goes on from the store, so the sidebar sees the run end as interrupted at once,
with monotonic ids. The next request starts a new host.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any, AsyncIterator

from ..app import AstroApp
from ..app.event_batches import Batch, Frames
from ..errors import InvalidRequest
from ..host.manager import AgentHost, AgentHostDied, AgentHostError

NOTEBOOK_METHODS = ("load", "save", "execute", "release_run")

log = logging.getLogger(__name__)


class HostedAstroApp(AstroApp):
    def __init__(self, config: Any, *, notebooks: Any = None, root_dir: str = "", **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        self._notebook_backend = notebooks  # the ContentsManager / kernel backend the host's notebook tools call
        self._warming: asyncio.Task[None] | None = None
        self.host_model = ""  # the model the host's runs use now, as of its last model list
        self.host = AgentHost(config, root_dir=root_dir, source=self.source, on_call=self._host_call,
                              on_death=self._host_died, tuning=self.services.tuning)

    # -- lifecycle ----------------------------------------------------------------------------------
    async def _start_runtime(self) -> None:
        self.check_agent_config()  # the host's runtime would refuse it: every route says why (503)
        await self.close_orphaned_runs()  # no runtime here: the host starts when the sidebar first calls

    def _llm(self) -> Any:
        """The endpoint's model list comes from the host: this process never imports the LLM client."""
        return _HostModels(self)

    async def endpoint_models(self) -> list[str]:
        """No timeout here: the host applies the endpoint's own, so its start (seconds of imports on a
        loaded machine) is not counted as the endpoint's silence."""
        return list(await self._llm().list_models())

    async def start(self) -> "HostedAstroApp":
        """Open the store; the first call (the sidebar opening) also starts the host in the background,
        so the first prompt does not wait for its imports. A host that cannot start is reported then."""
        await super().start()
        if self._warming is None and not self._closed:
            self._warming = asyncio.create_task(self._warm_host())
            self._warm = self._warming  # the model list waits for the host's start, not inside its timeout
        return self

    async def _warm_host(self) -> None:
        try:
            await self.host.ensure()
        except AgentHostError as exc:
            log.warning("astro_jupyter: %s", exc)

    async def close(self) -> None:
        if self._warming is not None and not self._warming.done():
            self._warming.cancel()
            await asyncio.gather(self._warming, return_exceptions=True)
        await self.host.stop()
        await super().close()

    async def _host_died(self, runs: dict[str, str]) -> None:
        self.host_model = ""  # a new host starts from the configured model
        await self.close_orphaned_runs()

    async def _host_call(self, msg: dict[str, Any]) -> Any:
        """The host's requests: notebook tools reach the ContentsManager and the kernels here."""
        if msg.get("op") != "notebook" or msg.get("method") not in NOTEBOOK_METHODS or self._notebook_backend is None:
            raise InvalidRequest(f"the server does not answer {msg.get('op')!r}/{msg.get('method')!r}")
        backend, method = self._notebook_backend, msg["method"]
        if method == "release_run":
            await backend.release_run(str(msg["run_id"]))
            return None
        path = Path(str(msg["path"]))
        if method == "load":
            return await backend.load(path, for_edit=bool(msg.get("for_edit")))
        import nbformat

        nb = nbformat.from_dict(msg["nb"])
        if method == "save":
            await backend.save(path, nb, run_id=str(msg["run_id"]))
            return None
        return await backend.execute(path, nb, int(msg["index"]), run_id=str(msg["run_id"]))

    # -- runs ---------------------------------------------------------------------------------------
    async def start_run(self, owner: Any, prompt: Any, *, session_id: str | None = None, model: str | None = None,
                        coordinator: bool | None = None, max_steps: int | None = None,
                        notebook: Any = None) -> dict[str, str]:
        prompt = self.check_prompt(prompt)  # refused here, without waking a host
        max_steps = self.check_max_steps(max_steps)
        key = owner or ""
        args = {"session_id": session_id, "model": model or self._owner_models.get(key) or None,
                "coordinator": coordinator, "max_steps": max_steps, "notebook": notebook}
        try:
            return await self.host.request("start_run", key, prompt=prompt, args=args)
        except AgentHostDied as exc:
            raise AgentHostError("the agent host stopped while the run was starting; send the prompt again") from exc

    async def run_events(self, owner: Any, run_id: str, after_seq: int = 0, *,
                         pace: float = 0.0) -> AsyncIterator[Batch | Frames] | None:
        """A live run's events come from the host as SSE bytes (``Frames``, paced there); a finished
        run's, and the rest of a run whose host died, from the store as ``Batch``es."""
        if run_id not in self.host.runs:  # finished, or never here: the store has it all
            return await super().run_events(owner, run_id, after_seq, pace=pace)
        try:
            stream = await self.host.subscribe(owner or "", run_id, after_seq, pace)
        except AgentHostDied:
            await self.host.recovered()
            return await super().run_events(owner, run_id, after_seq, pace=pace)
        if stream is None:
            return None
        return self._hosted_events(owner, run_id, after_seq, stream)

    async def _hosted_events(self, owner: Any, run_id: str, after_seq: int,
                             stream: AsyncIterator[Frames]) -> AsyncIterator[Batch | Frames]:
        last = after_seq
        try:
            async for frames in stream:
                yield frames
                last = frames.last_seq
            return
        except AgentHostDied:
            pass
        finally:
            await stream.aclose()  # type: ignore[attr-defined]
        await self.host.recovered()  # the dead host's runs now end in the store (error + done)
        rest = await super().run_events(owner, run_id, last)
        if rest is not None:
            async for batch in rest:
                yield batch

    async def cancel_run(self, owner: Any, run_id: str) -> dict[str, Any]:
        if run_id in self.host.runs:
            try:
                return await self.host.request("cancel", owner or "", run_id=run_id)
            except AgentHostDied:
                await self.host.recovered()
        return await super().cancel_run(owner, run_id)

    async def answer(self, owner: Any, run_id: str, request_id: str, answer: Any) -> dict[str, Any]:
        if run_id in self.host.runs:
            try:
                return await self.host.request("answer", owner or "", run_id=run_id, request_id=request_id, answer=answer)
            except AgentHostDied:
                await self.host.recovered()
        return await super().answer(owner, run_id, request_id, answer)

    async def settle_session(self, session_id: str) -> None:
        if session_id in self.host.runs.values() and self.host.alive:
            try:
                await self.host.request("settle", "", session_id=session_id)
            except AgentHostDied:
                await self.host.recovered()

    def active_run_id(self, session_id: str) -> str | None:
        return next((run for run, session in self.host.runs.items() if session == session_id), None)



class _HostModels:
    """What ``ModelsMixin`` asks of the LLM client: its default model (configuration) and the endpoint's list (the host)."""

    def __init__(self, app: HostedAstroApp) -> None:
        self.app = app

    @property
    def model(self) -> str:
        """The host's current model as of its last answer (a fallback switch there changes it), else the setting."""
        return self.app.host_model or str(self.app.config.llm_model)

    async def list_models(self) -> list[str]:
        try:
            reply = await self.app.host.request("list_models", "")
        except AgentHostError as exc:
            raise AgentHostError(f"the agent host cannot list the endpoint's models: {exc}") from exc
        self.app.host_model = str(reply.get("current") or "")
        if reply.get("timed_out"):
            raise asyncio.TimeoutError
        return list(reply.get("models") or [])
