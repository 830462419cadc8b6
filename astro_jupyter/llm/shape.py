"""The shape of a streamed chat-completions chunk, checked where it enters.

Why: the ``openai`` client builds its chunk objects without validation, so whatever the endpoint
(or a misbehaving model behind it) sends arrives as-is: ``content`` as a number or a list, a
numeric call id or tool name, ``choices`` as a string, text with lone UTF-16 surrogates. Deep
inside the runtime those became ``TypeError``/``AttributeError`` tracebacks or a lost event batch.
Here every chunk is read as plain JSON, each field is checked against the wire format, and text is
cleaned (``textsafe.clean_text``), so the rest of the package only ever sees strings and ints.
A shape that cannot be used raises :class:`MalformedChunk`, which the client reports as an
``LlmError`` naming the field.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ..errors import InvalidInput
from ..textsafe import clean_text


class MalformedChunk(InvalidInput):
    """A chunk that does not fit the chat-completions wire format; the message names the field."""


@dataclass
class CallFragment:
    index: int
    id: str = ""
    name: str = ""
    arguments: str = ""


@dataclass
class ChunkView:
    """What one chunk contributes: text, reasoning, call fragments, finish reason, usage."""

    content: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    calls: list[CallFragment] = field(default_factory=list)
    finish_reason: str | None = None
    usage: dict[str, int] | None = None


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, (list, tuple)):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def as_dict(chunk: Any) -> dict[str, Any]:
    """The chunk as the JSON the endpoint sent (openai objects keep unknown and mistyped fields)."""
    if isinstance(chunk, dict):
        return chunk
    to_dict = getattr(chunk, "to_dict", None)
    if callable(to_dict):
        try:
            data = to_dict(warnings=False)
        except Exception as exc:  # noqa: BLE001 - pydantic refusing a pathological value
            raise MalformedChunk(f"a chunk could not be read ({type(exc).__name__}: {exc})") from None
        if isinstance(data, dict):
            return data
    raise MalformedChunk(f"a chunk is {_kind(chunk)}, not a JSON object")


def _json_text(value: Any) -> str:
    """A non-string where a string belongs, shown as the JSON the model sent (so errors can quote it)."""
    try:
        return clean_text(json.dumps(value, ensure_ascii=False, default=str))
    except (TypeError, ValueError, RecursionError):
        return f"<{_kind(value)}>"


def read_chunk(chunk: Any) -> ChunkView:
    """Check one chunk and return its parts; raises ``MalformedChunk`` for shapes that cannot be used."""
    data = as_dict(chunk)
    view = ChunkView()
    usage = data.get("usage")
    if isinstance(usage, dict):
        view.usage = {clean_text(str(k)): v for k, v in usage.items() if isinstance(v, int) and not isinstance(v, bool)}
    choices = data.get("choices")
    if choices is None:
        return view
    if not isinstance(choices, list):
        raise MalformedChunk(f"'choices' is {_kind(choices)}, expected an array")
    for i, choice in enumerate(choices):
        where = f"choices[{i}]"
        if not isinstance(choice, dict):
            raise MalformedChunk(f"{where} is {_kind(choice)}, expected an object")
        delta = choice.get("delta")
        if delta is None:
            delta = {}
        if not isinstance(delta, dict):
            raise MalformedChunk(f"{where}.delta is {_kind(delta)}, expected an object")
        for key in ("reasoning_content", "reasoning"):
            value = delta.get(key)
            if isinstance(value, str) and value:  # a vendor extension: anything else is ignored
                view.reasoning.append(clean_text(value))
                break
        content = delta.get("content")
        if content is not None:
            if not isinstance(content, str):
                raise MalformedChunk(f"{where}.delta.content is {_kind(content)}, expected a string")
            if content:
                view.content.append(clean_text(content))
        tool_calls = delta.get("tool_calls")
        if tool_calls is not None:
            if not isinstance(tool_calls, list):
                raise MalformedChunk(f"{where}.delta.tool_calls is {_kind(tool_calls)}, expected an array")
            for j, frag in enumerate(tool_calls):
                view.calls.append(_fragment(frag, f"{where}.delta.tool_calls[{j}]"))
        finish = choice.get("finish_reason")
        if isinstance(finish, str) and finish:
            view.finish_reason = clean_text(finish)
    return view


def _fragment(frag: Any, where: str) -> CallFragment:
    if not isinstance(frag, dict):
        raise MalformedChunk(f"{where} is {_kind(frag)}, expected an object")
    index = frag.get("index")
    if index is not None and (isinstance(index, bool) or not isinstance(index, int) or index < 0):
        raise MalformedChunk(f"{where}.index is {_json_text(index)}, expected a non-negative integer")
    fn = frag.get("function")
    if fn is None:
        fn = {}
    if not isinstance(fn, dict):
        raise MalformedChunk(f"{where}.function is {_kind(fn)}, expected an object")
    out = CallFragment(index=-1 if index is None else index)
    call_id = frag.get("id")
    # An id is ours to repair (a blank one gets a fresh id): a non-string id is dropped the same way.
    if isinstance(call_id, str):
        out.id = clean_text(call_id)
    name = fn.get("name")
    if isinstance(name, str):
        out.name = clean_text(name)
    elif name is not None:
        out.name = _json_text(name)  # not a tool name: the executor answers "unknown tool" with it quoted
    args = fn.get("arguments")
    if isinstance(args, str):
        out.arguments = clean_text(args)
    elif isinstance(args, dict):
        out.arguments = _json_text(args)  # some endpoints send the object itself: it is what was meant
    elif args is not None:
        out.arguments = _json_text(args)  # the executor answers "arguments must be a JSON object"
    return out
