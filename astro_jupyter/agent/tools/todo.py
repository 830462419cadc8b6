"""``todo_write``: the model's plan as a task list with ``blocked_by`` dependencies (a DAG).

The whole list is sent each time (the model rewrites its plan), validated, stored in
``agent_tasks`` and announced with a ``todo_update`` event so the sidebar and the cell
widget redraw it. Invalid plans (cycles, unknown or duplicate ids, two tasks in progress,
a task started before its blockers are done) are refused with the reason and store nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...errors import InvalidInput
from ...events import TodoUpdate
from .base import AgentTool, InterruptBehavior, ToolContext, ToolOutput

if TYPE_CHECKING:
    from ...config import AstroConfig

STATUSES = ("pending", "in_progress", "completed")
_MARK = {"pending": "[ ]", "in_progress": "[~]", "completed": "[x]"}


class TodoError(InvalidInput):
    """A plan that cannot be stored; the message is for the model."""


def find_cycle(edges: dict[str, list[str]]) -> list[str] | None:
    """A dependency cycle as a path (first node repeated at the end), or None for a DAG."""
    state: dict[str, int] = {}  # 1 = on the stack, 2 = finished
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in edges.get(node, []):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt) :] + [nxt]
            if state.get(nxt) is None:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in edges:
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def validate_todos(raw: Any) -> list[dict[str, Any]]:
    """Normalise and check a plan; raises TodoError with every rule the model broke first."""
    if not isinstance(raw, list):
        raise TodoError("'todos' must be a list of {id, content, status, blocked_by}")
    todos: list[dict[str, Any]] = []
    seen: set[str] = set()
    for index, item in enumerate(raw):
        if not isinstance(item, dict):
            raise TodoError(f"todo #{index + 1} is not an object")
        task_id = str(item.get("id") or "").strip()
        content = str(item.get("content") or "").strip()
        status = str(item.get("status") or "pending").strip()
        blocked_by = item.get("blocked_by") or []
        if not task_id:
            raise TodoError(f"todo #{index + 1} has no id")
        if task_id in seen:
            raise TodoError(f"duplicate todo id {task_id!r}")
        if not content:
            raise TodoError(f"todo {task_id!r} has no content")
        if status not in STATUSES:
            raise TodoError(f"todo {task_id!r}: status must be one of {', '.join(STATUSES)}, got {status!r}")
        if not isinstance(blocked_by, list) or not all(isinstance(b, (str, int)) for b in blocked_by):
            raise TodoError(f"todo {task_id!r}: blocked_by must be a list of todo ids")
        seen.add(task_id)
        todos.append({"id": task_id, "content": content, "status": status, "blocked_by": [str(b) for b in blocked_by]})
    by_id = {t["id"]: t for t in todos}
    for todo in todos:
        if todo["id"] in todo["blocked_by"]:
            raise TodoError(f"todo {todo['id']!r} cannot be blocked by itself")
        unknown = [b for b in todo["blocked_by"] if b not in by_id]
        if unknown:
            raise TodoError(f"todo {todo['id']!r} is blocked by unknown id(s): {', '.join(unknown)}")
    cycle = find_cycle({t["id"]: t["blocked_by"] for t in todos})
    if cycle:
        raise TodoError("blocked_by forms a cycle: " + " -> ".join(cycle) + " (dependencies must form a DAG)")
    active = [t["id"] for t in todos if t["status"] == "in_progress"]
    if len(active) > 1:
        raise TodoError(f"only one todo may be in_progress at a time, got {len(active)}: {', '.join(active)}")
    for todo in todos:
        if todo["status"] == "pending":
            continue
        open_blockers = [b for b in todo["blocked_by"] if by_id[b]["status"] != "completed"]
        if open_blockers:
            raise TodoError(
                f"todo {todo['id']!r} is {todo['status']} but its blocker(s) {', '.join(open_blockers)} are not completed"
            )
    return todos


def render(todos: list[dict[str, Any]]) -> str:
    if not todos:
        return "Todo list is empty."
    lines = []
    for t in todos:
        after = f" (after {', '.join(t['blocked_by'])})" if t["blocked_by"] else ""
        lines.append(f"{_MARK[t['status']]} {t['id']}: {t['content']}{after}")
    done = sum(t["status"] == "completed" for t in todos)
    return f"Todo list updated ({done}/{len(todos)} completed):\n" + "\n".join(lines)


def todo_scope(ctx: ToolContext) -> str:
    """Subagents keep their own list so they never overwrite the parent's plan."""
    return f"{ctx.session_id}:{ctx.subagent_id}" if ctx.subagent_id else ctx.session_id


class TodoWriteTool(AgentTool):
    name = "todo_write"
    defer_loading = True
    description = (
        "Plan multi-step work as a todo list. Send the complete list each time: items with id, content, "
        "status (pending | in_progress | completed) and blocked_by (ids that must be completed first). "
        "At most one item may be in_progress; dependencies must not form a cycle."
    )
    parameters = {
        "type": "object",
        "properties": {
            "todos": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "id": {"type": "string"},
                        "content": {"type": "string"},
                        "status": {"type": "string", "enum": list(STATUSES)},
                        "blocked_by": {"type": "array", "items": {"type": "string"}},
                    },
                    "required": ["id", "content", "status"],
                },
            }
        },
        "required": ["todos"],
    }
    interrupt_behavior = InterruptBehavior.CANCEL
    agent_step = True

    def is_concurrency_safe(self, args: dict[str, Any]) -> bool:
        return True

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        try:
            todos = validate_todos(args.get("todos"))
        except TodoError as exc:
            return ToolOutput.error(f"todo list not saved: {exc}")
        await ctx.services.tasks.replace_all(todo_scope(ctx), todos)
        await ctx.emit(TodoUpdate(todos=todos, subagent_id=ctx.subagent_id))
        return ToolOutput(render(todos), metadata={"todos": todos})


def tools(config: "AstroConfig") -> list[AgentTool]:
    return [TodoWriteTool()]
