"""Our run events as ACP ``session/update`` payloads (pure functions: no I/O, no connection).

One event gives at most one update: text → ``agent_message_chunk``, thinking →
``agent_thought_chunk``, a tool call → ``tool_call`` (kind, title, locations, raw input), its
progress and result → ``tool_call_update`` (status, content, locations), the todo list →
``plan``. Questions are not updates (``agent.py`` turns them into ``session/request_permission``);
the bookkeeping events (``session``, ``question_answered``, ``done``) give none; a ``truncated``
notice is said in the message (and the prompt ends ``max_tokens``, ``stop_reason``). A subagent's
text stays inside it (as in the sidebar); its tool calls are shown, their ids prefixed with the
subagent's so two loops' ``call_1`` never collide in the client.
"""

from __future__ import annotations

import os
from typing import Any

from acp import (
    plan_entry,
    start_tool_call,
    text_block,
    tool_content,
    tool_diff_content,
    update_agent_message_text,
    update_agent_thought_text,
    update_plan,
    update_tool_call,
)
from acp.schema import ToolCallLocation

from ..events import Event

MAX_TOOL_TEXT = 20_000  # characters of a tool's output shown in the client (the model saw all of it)
MAX_TITLE = 100

# what the client's icon says about a tool; unknown tools are "other"
TOOL_KINDS: dict[str, str] = {
    "read_file": "read", "notebook_read": "read", "get_paper_content": "read", "kernel_inspect": "read",
    "file_write": "edit", "file_edit": "edit", "notebook_edit": "edit", "save_note": "edit",
    "grep_files": "search", "glob_files": "search", "search_papers": "search", "rag_search": "search",
    "search_history": "search",
    "run_bash": "execute", "notebook_run": "execute", "kernel_run": "execute",
    "query_target": "fetch", "get_paper_metadata": "fetch", "download_paper": "fetch",
    "todo_write": "think", "compress_context": "think",
}
# the argument that names the subject of a call, shown in its title
TITLE_ARGS = ("path", "pattern", "query", "name", "command", "identifier", "paper_id", "task", "title")


def tool_call_id(event: Any, raw_id: str) -> str:
    sub = getattr(event, "subagent_id", None)
    return f"{sub}/{raw_id}" if sub else raw_id


def tool_kind(name: str) -> str:
    return TOOL_KINDS.get(name, "other")


def tool_title(name: str, arguments: Any) -> str:
    """``read_file notes.md``: the tool and what it acts on, one line."""
    subject = ""
    if isinstance(arguments, dict):
        subject = next((str(arguments[k]) for k in TITLE_ARGS if isinstance(arguments.get(k), (str, int, float))), "")
    title = f"{name} {' '.join(subject.split())}".strip()
    return title if len(title) <= MAX_TITLE else title[: MAX_TITLE - 1] + "…"


def locations(arguments: Any, metadata: Any, project_root: str) -> list[ToolCallLocation] | None:
    """Files a call touches, absolute (ACP wants absolute paths): the resolved path of the result
    when there is one, else the argument taken relative to the project root."""
    path = metadata.get("path") if isinstance(metadata, dict) else None
    line = metadata.get("start_line") if isinstance(metadata, dict) else None
    if not isinstance(path, str) and isinstance(arguments, dict) and isinstance(arguments.get("path"), str):
        raw = arguments["path"]
        if raw and "\x00" not in raw:
            path = raw if os.path.isabs(raw) else os.path.normpath(os.path.join(project_root, raw))
            offset = arguments.get("offset")
            line = offset if isinstance(offset, int) and not isinstance(offset, bool) else None
    if not isinstance(path, str) or not path:
        return None
    return [ToolCallLocation(path=path, line=line if isinstance(line, int) and line >= 0 else None)]


DIFF_TOOLS = ("file_write", "file_edit")


def call_content(name: str, arguments: Any, project_root: str) -> list[Any] | None:
    """What a client shows for a call before it runs: the diff a file tool would make (the whole new
    text for ``file_write``, the replaced passage for ``file_edit``)."""
    if name not in DIFF_TOOLS or not isinstance(arguments, dict):
        return None
    where = locations(arguments, None, project_root)
    if not where:
        return None
    if name == "file_write" and isinstance(arguments.get("content"), str):
        return [tool_diff_content(where[0].path, arguments["content"])]
    old, new = arguments.get("old_string"), arguments.get("new_string")
    if name == "file_edit" and isinstance(old, str) and isinstance(new, str):
        return [tool_diff_content(where[0].path, new, old)]
    return None


def _clip(text: str) -> str:
    if len(text) <= MAX_TOOL_TEXT:
        return text
    return text[:MAX_TOOL_TEXT] + f"\n… [{len(text) - MAX_TOOL_TEXT} more characters not shown]"


def to_update(event: Event, project_root: str) -> Any | None:
    """The ``session/update`` of one event, or None when the client needs none."""
    kind = event.type
    sub = event.subagent_id
    if kind == "text_delta":
        return None if sub else update_agent_message_text(event.delta)  # type: ignore[attr-defined]
    if kind == "thinking_delta":
        return None if sub else update_agent_thought_text(event.delta)  # type: ignore[attr-defined]
    if kind == "tool_call":
        name, args = event.name, event.arguments  # type: ignore[attr-defined]
        return start_tool_call(
            tool_call_id(event, event.id), tool_title(name, args), kind=tool_kind(name),  # type: ignore[attr-defined,arg-type]
            status="pending", content=call_content(name, args, project_root),
            locations=locations(args, None, project_root), raw_input=args,
        )
    if kind == "tool_progress":
        progress = event.progress  # type: ignore[attr-defined]
        message = str(progress.get("message") or "") if isinstance(progress, dict) else ""
        done, total = (progress.get("done"), progress.get("total")) if isinstance(progress, dict) else (None, None)
        if total:
            message = f"{message} ({done}/{total})".strip()
        return update_tool_call(
            tool_call_id(event, event.id), status="in_progress",  # type: ignore[attr-defined]
            content=[tool_content(text_block(message))] if message else None,
        )
    if kind == "tool_result":
        metadata = event.metadata  # type: ignore[attr-defined]
        output = _clip(event.output)  # type: ignore[attr-defined]
        keep_diff = event.name in DIFF_TOOLS and not event.is_error  # type: ignore[attr-defined]
        return update_tool_call(
            tool_call_id(event, event.tool_call_id),  # type: ignore[attr-defined]
            status="failed" if event.is_error else "completed",  # type: ignore[attr-defined]
            content=None if keep_diff else [tool_content(text_block(output))],  # None: the call's diff stays shown
            locations=locations(None, metadata, project_root),
            raw_output={"output": output, "is_error": event.is_error, "duration_ms": event.duration_ms},  # type: ignore[attr-defined]
        )
    if kind == "todo_update" and not sub:
        return update_plan(
            plan_entry(str(t.get("content", "")), priority="medium", status=t.get("status", "pending"))  # type: ignore[arg-type]
            for t in event.todos  # type: ignore[attr-defined]
            if isinstance(t, dict) and t.get("status") in ("pending", "in_progress", "completed")
        )
    if kind == "error" and not sub:
        label = "Note" if event.reason == "notice" else "Error"  # type: ignore[attr-defined]
        return update_agent_message_text(f"\n\n**{label}:** {event.message}\n")  # type: ignore[attr-defined]
    if kind == "truncated" and not sub:  # otherwise the client shows a cut answer as a whole one
        return update_agent_message_text(f"\n\n**Cut off:** {event.message}\n")  # type: ignore[attr-defined]
    if kind == "model_switch" and not sub:
        return update_agent_thought_text(
            f"(model switched from {event.from_model} to {event.to_model}: {event.reason})\n"  # type: ignore[attr-defined]
        )
    if kind == "compaction" and not sub and event.message:  # type: ignore[attr-defined]
        return update_agent_thought_text(f"({event.message})\n")  # type: ignore[attr-defined]
    return None


STOP_REASONS = {"finished": "end_turn", "cancelled": "cancelled", "max_steps": "max_turn_requests", "error": "end_turn"}


def stop_reason(done_reason: str, *, cut_off: bool = False) -> str:
    """ACP's ``stopReason`` for our ``done`` reason (an error was already told as a message). A run
    that finished on an answer the output bound cut off (``cut_off``, see ``answer_cut_off``) is
    ``max_tokens``: it looks finished and is not, and the client should say so."""
    if cut_off and done_reason == "finished":
        return "max_tokens"
    return STOP_REASONS.get(done_reason, "end_turn")


def answer_cut_off(event: Event, cut_off: bool) -> bool:
    """Whether the run's answer so far ends cut off, after ``event`` (``cut_off``: before it). A
    ``truncated`` notice in the text sets it; a cut inside a tool call does not (the call was not
    run, the model was told and writes on), and later text or calls clear it. Subagents' do not count."""
    if event.subagent_id:
        return cut_off
    if event.type == "truncated":
        return not event.tool_name  # type: ignore[attr-defined]
    if event.type in ("text_delta", "tool_call"):
        return False
    return cut_off
