"""The server's notebook backend: jupyter_server's ContentsManager and the notebook's kernel session.

Used by sidebar runs when the notebook is not open in the sidebar (else the bridge applies
the change to the open document). No raw file writes: reads and saves go through the
ContentsManager (so custom managers, hooks, trust signing and checkpoints apply), and
before the first change a run makes to an existing notebook a checkpoint is created —
"Revert Notebook to Checkpoint" in JupyterLab undoes the agent. Cells run on the kernel
of the notebook's session (the same one JupyterLab attaches to when the notebook is
opened), started through the SessionManager if there is none; the run keeps a client to
it and lets go when the run ends, leaving the kernel to its session.
"""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from jupyter_core.utils import ensure_async
from tornado import web

from ..errors import NotebookError
from ..services.notebooks.files import KERNEL_STARTUP_SECS, RUN_TIMEOUT_SECS, execute_cell

if TYPE_CHECKING:
    from nbformat import NotebookNode

    from ..config import AstroConfig

log = logging.getLogger(__name__)


class ServerNotebookBackend:
    where = "contents"

    def __init__(self, serverapp: Any, config: "AstroConfig") -> None:
        self.serverapp = serverapp
        self.config = config
        self._checkpointed: set[tuple[str, str]] = set()
        self._clients: dict[tuple[str, str], Any] = {}
        self._saved: dict[str, tuple[tuple[Any, Any], "NotebookNode"]] = {}  # api path → (stamp, what we saved)
        self._lock = asyncio.Lock()

    @property
    def contents(self) -> Any:
        return self.serverapp.contents_manager

    @property
    def root(self) -> Path:
        return Path(os.path.realpath(self.contents.root_dir))

    # -- paths -----------------------------------------------------------------------------------
    def client_path(self, path: Path) -> str | None:
        """The API path (relative to the server root, '/'-separated) of a real path, None if outside."""
        try:
            rel = path.relative_to(self.root)
        except ValueError:
            return None
        return PurePosixPath(*rel.parts).as_posix()

    def real_path(self, api_path: str) -> Path:
        return self.root.joinpath(*PurePosixPath(api_path).parts)

    def _api(self, path: Path) -> str:
        api = self.client_path(path)
        if api is None:
            raise NotebookError(f"{path} is outside the Jupyter server's root ({self.root}); the server changes "
                                "notebooks only under it")
        return api

    # -- contents --------------------------------------------------------------------------------
    async def load(self, path: Path, *, for_edit: bool = False) -> "NotebookNode | None":
        """The notebook through the ContentsManager. ``for_edit``: the caller changes and saves it
        under the notebook's lock, so the copy this backend saved last may be handed out again
        when the file has not changed since (same ``last_modified`` and size): a large notebook
        is then not parsed and validated again for every edit of a run."""
        api = self._api(path)
        try:
            if not await ensure_async(self.contents.file_exists(api)):
                if await ensure_async(self.contents.dir_exists(api)):
                    raise NotebookError(f"{api} is a directory, not a notebook")
                return None
            cached = self._saved.pop(api, None) if for_edit else None
            if cached is not None:
                stamp = await ensure_async(self.contents.get(api, content=False, type="notebook"))
                if (stamp.get("last_modified"), stamp.get("size")) == cached[0]:
                    return cached[1]
            model = await ensure_async(self.contents.get(api, content=True, type="notebook"))
        except web.HTTPError as exc:
            raise NotebookError(f"{api} is not a readable notebook: {exc.log_message or exc}") from exc
        return model["content"]

    async def save(self, path: Path, nb: "NotebookNode", *, run_id: str) -> None:
        api = self._api(path)
        parent = str(PurePosixPath(api).parent)
        parent = "" if parent == "." else parent
        try:
            if parent and not await ensure_async(self.contents.dir_exists(parent)):
                raise NotebookError(f"the folder of {api} does not exist; create it first")
            key = (run_id, api)
            if (key not in self._checkpointed or not run_id) and await ensure_async(self.contents.file_exists(api)):
                await ensure_async(self.contents.create_checkpoint(api))
                self._checkpointed.add(key)
            self._saved.pop(api, None)
            saved = await ensure_async(self.contents.save({"type": "notebook", "format": "json", "content": nb}, api))
            stamp = await ensure_async(self.contents.get(api, content=False, type="notebook"))
            if (saved or {}).get("last_modified") == stamp.get("last_modified"):
                self._saved[api] = ((stamp.get("last_modified"), stamp.get("size")), nb)
        except web.HTTPError as exc:
            raise NotebookError(f"the server could not save {api}: {exc.log_message or exc}") from exc

    # -- kernels ---------------------------------------------------------------------------------
    async def execute(self, path: Path, nb: "NotebookNode", index: int, *, run_id: str) -> "NotebookNode":
        api = self._api(path)
        client = await self._client(run_id, api, nb)
        return await execute_cell(client, nb, index)

    async def _client(self, run_id: str, api: str, nb: "NotebookNode") -> Any:
        from nbclient import NotebookClient

        async with self._lock:
            kernel_id = await self._session_kernel(api, nb)
            client = self._clients.get((run_id, api))
            if client is not None and getattr(client, "kernel_id", None) == kernel_id:
                return client
            if client is not None:
                await _stop(client)
            km = self.serverapp.kernel_manager.get_kernel(kernel_id)
            client = NotebookClient(nb, km=km, allow_errors=True, timeout=int(RUN_TIMEOUT_SECS),
                                    startup_timeout=int(KERNEL_STARTUP_SECS))
            client.kernel_id = kernel_id
            try:
                await client.async_start_new_kernel_client()
            except Exception as exc:  # noqa: BLE001
                raise NotebookError(f"could not connect to the kernel of {api}: {type(exc).__name__}: {exc}") from exc
            self._clients[(run_id, api)] = client
            return client

    async def _session_kernel(self, api: str, nb: "NotebookNode") -> str:
        """The kernel id of the notebook's session, starting a session (and kernel) if it has none."""
        sessions = self.serverapp.session_manager
        for model in await ensure_async(sessions.list_sessions()):
            kernel = model.get("kernel") or {}
            if model.get("path") == api and kernel.get("id") in self.serverapp.kernel_manager:
                return str(kernel["id"])
        name = (nb.metadata.get("kernelspec") or {}).get("name") or None
        try:
            model = await sessions.create_session(path=api, name=PurePosixPath(api).name, type="notebook", kernel_name=name)
        except Exception as exc:  # noqa: BLE001 - e.g. no such kernel spec
            raise NotebookError(f"could not start a kernel session for {api}: {type(exc).__name__}: {exc}") from exc
        return str(model["kernel"]["id"])

    async def release_run(self, run_id: str) -> None:
        self._checkpointed = {k for k in self._checkpointed if k[0] != run_id}
        for key in [k for k in self._clients if k[0] == run_id]:
            await _stop(self._clients.pop(key))

    async def aclose(self) -> None:
        for key in list(self._clients):
            await _stop(self._clients.pop(key))


async def _stop(client: Any) -> None:
    """Drop our connection; the kernel belongs to the notebook's session and keeps running."""
    kc = getattr(client, "kc", None)
    client.kc = None
    if kc is not None:
        try:
            result = kc.stop_channels()
            if asyncio.iscoroutine(result):
                await result
        except Exception:  # noqa: BLE001
            log.debug("stopping a kernel client failed", exc_info=True)
