"""The sidebar bridge: a run asks the attached sidebar to act on the notebook it has open.

When a sidebar starts a run it may say it can apply notebook operations through
JupyterLab's open document (``RunScope.client.bridge``, ``agent/run.py``). Then
notebook tools send a ``notebook_request`` event and wait for the sidebar's answer on the
answers route — the same channel as ``ask_user`` and permission answers — so the user
sees the cell appear and run live, undo works, and the file on disk is never written under
an open, unsaved document. The protocol is written down in ``docs/notebook-bridge.md``.

Answers are untrusted input: they are checked here and turned into clear errors.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import TYPE_CHECKING, Any

from ....errors import CellChanged, NotebookError, NotOpen, QuestionCancelled
from ....events import NotebookRequest
from ...run import ClientNotebook  # defined with the run scope; the server imports it from here

if TYPE_CHECKING:
    from ...run import PendingAnswers
    from ..base import ToolContext

STATUSES = ("ok", "not_open", "error", "changed")
BRIDGE_TIMEOUT_SECS = 60.0  # how long a sidebar run waits for the sidebar to apply an edit/run to the open notebook


class BridgeTimeout(NotebookError):
    """The sidebar did not answer in time."""


def client_notebook(ctx: "ToolContext") -> tuple[ClientNotebook | None, "PendingAnswers | None"]:
    """The run's sidebar context and the answer slots its replies land in (subagents share the parent's)."""
    scope = ctx.scope
    if scope is None:
        return None, None
    return scope.client, scope.answers


async def ask_client(ctx: "ToolContext", action: str, path: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """Send a ``notebook_request`` and return the sidebar's ``ok`` answer.

    Raises ``NotOpen`` (act server-side), ``BridgeTimeout`` or ``NotebookError`` (the
    sidebar reported an error or answered nonsense); cancellation ends the wait at once.
    """
    info, answers = client_notebook(ctx)
    if info is None or not info.bridge or answers is None:
        raise NotOpen(path)
    request_id = f"nbreq_{uuid.uuid4().hex[:16]}"
    from ....services.notebooks.files import RUN_TIMEOUT_SECS

    timeout = ctx.services.tuning.notebook_bridge_secs or BRIDGE_TIMEOUT_SECS
    if action == "run":  # the cell itself may run up to RUN_TIMEOUT_SECS
        timeout += RUN_TIMEOUT_SECS
    future = answers.create(request_id)  # before the event: an instant answer is not lost
    if future.done():  # the run was cancelled (Stop): the open notebook is not asked to change
        future.exception()
        raise asyncio.CancelledError("the run was cancelled before the notebook was asked")
    try:
        await ctx.emit(NotebookRequest(request_id=request_id, tool_call_id=ctx.tool_call_id, action=action,  # type: ignore[arg-type]
                                       path=path, arguments=arguments, timeout_secs=timeout,
                                       subagent_id=ctx.subagent_id))
        try:
            answer = await asyncio.wait_for(future, timeout)
        except asyncio.TimeoutError:
            raise BridgeTimeout(
                f"the sidebar did not answer within {timeout:g} s, so {path} was not touched (it may be open "
                "there with unsaved changes); try again or save and close it"
            ) from None
        except QuestionCancelled as exc:
            raise asyncio.CancelledError(str(exc)) from None
    finally:
        answers.discard(request_id)
    return check_answer(answer, action, path)


def check_answer(answer: Any, action: str, path: str) -> dict[str, Any]:
    if not isinstance(answer, dict) or answer.get("status") not in STATUSES:
        raise NotebookError(f"the sidebar answered the {action} request for {path} with something that is not "
                            "{\"status\": \"ok\" | \"not_open\" | \"error\" | \"changed\", ...}")
    status = answer["status"]
    if status == "not_open":
        raise NotOpen(path)
    if status == "changed":  # run with expected_source: the open cell differs, so the sidebar did not run it
        raise CellChanged(f"the cell in the open notebook {path} is not the code the user allowed", path)
    if status == "error":
        message = str(answer.get("message") or "no reason given")[:2000]
        raise NotebookError(f"the sidebar could not {action} in {path}: {message}")
    return answer


def notebook_from_answer(answer: dict[str, Any], path: str) -> Any:
    """The open document the sidebar sent (``read``), validated as nbformat v4."""
    import nbformat

    raw = answer.get("notebook")
    if not isinstance(raw, dict):
        raise NotebookError(f"the sidebar's read answer for {path} has no 'notebook' object")
    try:
        nb = nbformat.from_dict(raw)
        nbformat.validate(nb)
    except Exception as exc:  # noqa: BLE001 - whatever is wrong, say so plainly
        raise NotebookError(f"the sidebar sent an invalid notebook for {path}: {str(exc).splitlines()[0][:300]}") from exc
    return nb


def cell_from_answer(answer: dict[str, Any], path: str) -> Any:
    """The executed cell the sidebar sent (``run``), validated inside a one-cell notebook."""
    import nbformat
    import nbformat.v4 as nbf

    raw = answer.get("cell")
    if not isinstance(raw, dict) or raw.get("cell_type") != "code":
        raise NotebookError(f"the sidebar's run answer for {path} has no code 'cell' object")
    nb = nbf.new_notebook()
    try:
        nb.cells.append(nbformat.from_dict(raw))
        nbformat.validate(nb)
    except Exception as exc:  # noqa: BLE001
        raise NotebookError(f"the sidebar sent an invalid cell for {path}: {str(exc).splitlines()[0][:300]}") from exc
    return nb.cells[0]
