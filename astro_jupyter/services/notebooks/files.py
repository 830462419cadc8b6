"""Notebooks as files with kernels of their own: the backend of ``%%astro`` and the CLI.

Files are read and written with ``nbformat`` (validated, written atomically through a
temporary file, the mode kept). Before the first change a run makes to an existing
notebook, a checkpoint is copied where Jupyter keeps its own
(``.ipynb_checkpoints/<name>-checkpoint.ipynb``), so "Revert to checkpoint" in JupyterLab
undoes the agent's edits. Cells run in a kernel started for that notebook with
``nbclient`` (kernel named in its metadata, working directory its folder), kept for the
run and shut down when the run ends.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...atomic_write import atomic_write_text
from ...errors import NotebookError

if TYPE_CHECKING:
    from nbformat import NotebookNode

    from ...config import AstroConfig

log = logging.getLogger(__name__)

RUN_TIMEOUT_SECS = 600.0  # the longest one notebook_run cell may execute
KERNEL_STARTUP_SECS = 60.0  # how long notebook_run waits for a notebook's kernel to start


def checkpoint_path(path: Path) -> Path:
    """Where jupyter_server's ``FileCheckpoints`` keeps the checkpoint of ``path``."""
    return path.parent / ".ipynb_checkpoints" / f"{path.stem}-checkpoint{path.suffix}"


def read_notebook_file(path: Path) -> "NotebookNode | None":
    """The notebook at ``path`` (v4), None if there is no file; NotebookError if it is not one."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise NotebookError(f"{path.name} is a directory, not a notebook") from None
    except UnicodeDecodeError:
        raise NotebookError(f"{path.name} is not UTF-8 text, so it is not a notebook") from None
    except OSError as exc:
        raise NotebookError(f"cannot read {path.name}: {exc.strerror or exc}") from exc
    try:
        return fast_reads(text)
    except Exception as exc:  # noqa: BLE001 - nbformat raises many kinds for a bad file
        raise NotebookError(f"{path.name} is not a readable notebook: {type(exc).__name__}: {exc}"[:500]) from exc


def fast_reads(text: str) -> "NotebookNode":
    """A v4 notebook from JSON without nbformat's whole-notebook validation and deep copies.

    ``nbformat.reads`` validates every cell (and copies the notebook) on each read, which
    costs hundreds of ms on a large notebook; an edit only needs the structure, and the cells
    it writes are validated one by one (``cells.validate_cells``). Other versions go through
    nbformat's converter.
    """
    import json

    import nbformat
    from nbformat.v4.rwbase import rejoin_lines, strip_transient

    data = json.loads(text)
    if not isinstance(data, dict) or data.get("nbformat") != 4 or not isinstance(data.get("cells"), list):
        return nbformat.reads(text, as_version=4)
    nb = nbformat.from_dict(data)
    nb.setdefault("metadata", nbformat.NotebookNode())
    return strip_transient(rejoin_lines(nb))


def fast_writes(nb: "NotebookNode") -> str:
    """nbformat's on-disk JSON (sorted keys, indent 1, multi-line text split into lines), without
    re-validating and deep-copying the whole notebook; ``nb`` is left as it was."""
    import json

    from nbformat.v4.rwbase import rejoin_lines, split_lines, strip_transient

    strip_transient(split_lines(nb))
    try:
        text = json.dumps(nb, sort_keys=True, indent=1, separators=(",", ": "), ensure_ascii=False)
    finally:
        rejoin_lines(nb)
    return text + "\n"


def write_notebook_file(path: Path, nb: "NotebookNode") -> None:
    """nbformat JSON via temp file + rename: a crash never leaves half a notebook."""
    atomic_write_text(path, fast_writes(nb))


class NotebookKernels:
    """One nbclient ``NotebookClient`` (own kernel) per (run, notebook), closed with the run."""

    def __init__(self, config: "AstroConfig") -> None:
        self.config = config
        self._clients: dict[tuple[str, Path], Any] = {}
        self._lock = asyncio.Lock()

    async def client(self, run_id: str, path: Path, nb: "NotebookNode") -> Any:
        async with self._lock:
            client = self._clients.get((run_id, path))
            if client is not None and client.km is not None and await _alive(client.km):
                return client
            if client is not None:
                await self._shutdown(client)
            client = await self._start(path, nb)
            self._clients[(run_id, path)] = client
            return client

    async def _start(self, path: Path, nb: "NotebookNode") -> Any:
        from jupyter_client.kernelspec import NoSuchKernel
        from nbclient import NotebookClient

        name = str((nb.metadata.get("kernelspec") or {}).get("name") or "python3")
        client = NotebookClient(
            nb, kernel_name=name, allow_errors=True, timeout=int(RUN_TIMEOUT_SECS),
            startup_timeout=int(KERNEL_STARTUP_SECS), resources={"metadata": {"path": str(path.parent)}},
        )
        try:
            client.km = client.create_kernel_manager()
            await client.async_start_new_kernel(cwd=str(path.parent))
            await client.async_start_new_kernel_client()
        except NoSuchKernel:
            raise NotebookError(f"{path.name} asks for kernel {name!r}, which is not installed here") from None
        except Exception as exc:  # noqa: BLE001 - startup failures become a readable error
            if client.km is not None:
                await self._shutdown(client)
            raise NotebookError(f"could not start a {name!r} kernel for {path.name}: {type(exc).__name__}: {exc}") from exc
        return client

    async def execute(self, run_id: str, path: Path, nb: "NotebookNode", index: int) -> "NotebookNode":
        client = await self.client(run_id, path, nb)
        return await execute_cell(client, nb, index)

    async def release(self, run_id: str) -> None:
        for key in [k for k in self._clients if k[0] == run_id]:
            await self._shutdown(self._clients.pop(key))

    async def aclose(self) -> None:
        for key in list(self._clients):
            await self._shutdown(self._clients.pop(key))

    @staticmethod
    async def _shutdown(client: Any) -> None:
        try:
            if client.km is not None:
                await client._async_cleanup_kernel()
        except Exception:  # noqa: BLE001 - a kernel that is already gone is fine
            log.debug("kernel shutdown failed", exc_info=True)


async def _alive(km: Any) -> bool:
    try:
        result = km.is_alive()
        return bool(await result if asyncio.iscoroutine(result) else result)
    except Exception:  # noqa: BLE001
        return False


async def execute_cell(client: Any, nb: "NotebookNode", index: int) -> "NotebookNode":
    """Run ``nb.cells[index]`` on ``client``'s kernel; a cancel interrupts the kernel first."""
    from nbclient.exceptions import CellTimeoutError, DeadKernelError

    client.nb = nb
    cell = nb.cells[index]
    try:
        return await client.async_execute_cell(cell, index, store_history=True)
    except asyncio.CancelledError:
        try:
            result = client.km.interrupt_kernel()
            if asyncio.iscoroutine(result):
                await result
        except Exception:  # noqa: BLE001 - best effort: the run is being cancelled anyway
            log.debug("interrupting the notebook kernel failed", exc_info=True)
        raise
    except CellTimeoutError as exc:
        raise NotebookError(f"the cell did not finish within {client.timeout} s") from exc
    except DeadKernelError as exc:
        raise NotebookError(f"the kernel died while running the cell: {exc}") from exc


class FileNotebookBackend:
    """Notebooks on disk (nbformat), cells run in kernels this process starts."""

    where = "file"

    def __init__(self, config: "AstroConfig") -> None:
        self.config = config
        self.kernels = NotebookKernels(config)
        self._checkpointed: set[tuple[str, Path]] = set()

    async def load(self, path: Path, *, for_edit: bool = False) -> "NotebookNode | None":
        return await asyncio.to_thread(read_notebook_file, path)

    async def save(self, path: Path, nb: "NotebookNode", *, run_id: str) -> None:
        def write() -> None:
            if not path.parent.is_dir():
                raise NotebookError(f"the folder of {path.name} does not exist; create it first")
            key = (run_id, path)
            if path.exists() and (key not in self._checkpointed or not run_id):
                target = checkpoint_path(path)
                target.parent.mkdir(exist_ok=True)
                shutil.copy2(path, target)
                self._checkpointed.add(key)
            try:
                write_notebook_file(path, nb)
            except OSError as exc:
                raise NotebookError(f"cannot write {path.name}: {exc.strerror or exc}") from exc

        await asyncio.to_thread(write)

    async def execute(self, path: Path, nb: "NotebookNode", index: int, *, run_id: str) -> "NotebookNode":
        return await self.kernels.execute(run_id, path, nb, index)

    async def release_run(self, run_id: str) -> None:
        self._checkpointed = {k for k in self._checkpointed if k[0] != run_id}
        await self.kernels.release(run_id)

    async def aclose(self) -> None:
        await self.kernels.aclose()
