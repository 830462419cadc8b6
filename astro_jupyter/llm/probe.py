"""What an endpoint can do for the chosen model, asked with tiny real requests (for ``doctor``).

Why: a newcomer's local server may list models but not stream, ignore tools (llama-cpp-python's
``chatml-function-calling`` drops them unless ``tool_choice`` is set), serve a 4k context, or no
embeddings. Each answer here comes from one small request, never from the server's own claims.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import AstroError
from .types import Completed, TextChunk, ToolCallReady

if TYPE_CHECKING:
    from .client import LlmClient

PING_TOOL = {
    "type": "function",
    "function": {
        "name": "ping",
        "description": "Answer the user's ping. Call it.",
        "parameters": {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": []},
    },
}
PROBE_TOKENS = 32  # enough for "OK" or a ping call's arguments


async def capabilities(client: "LlmClient", model: str, embed_model: str = "") -> dict[str, Any]:
    """streams / calls tools / context window and its source / serves embeddings, each with the reason when not."""
    out: dict[str, Any] = {}
    try:
        chunks, text = 0, ""
        async for item in client.stream([{"role": "user", "content": "Reply with the single word OK."}], model=model,
                                        max_tokens=PROBE_TOKENS):
            if isinstance(item, TextChunk):
                chunks += 1
            elif isinstance(item, Completed):
                text = item.text
        out["streams"] = True
        out["stream_chunks"] = chunks
        out["sample"] = text[:80]
    except AstroError as exc:
        out.update(streams=False, stream_error=str(exc))
    try:
        called = ""
        async for item in client.stream([{"role": "user", "content": "ping"}], [PING_TOOL], model=model,
                                        tool_choice="required", max_tokens=PROBE_TOKENS):
            if isinstance(item, ToolCallReady):
                called = item.name
        out["calls_tools"] = called == "ping"
        if called != "ping":
            out["tools_error"] = (f"asked to call a tool (tool_choice: required), it called {called!r}" if called else
                                  "asked to call a tool (tool_choice: required), it answered with text")
    except AstroError as exc:
        out.update(calls_tools=False, tools_error=str(exc))
    profile = await client.profile(model)
    out["context_window"] = profile.context_window
    out["context_source"] = profile.source
    out["max_tokens"] = profile.max_output_tokens
    try:
        vectors = await client.embed(["ping"], embed_model or model, retries=0)
        out["embeddings"] = bool(vectors and vectors[0])
        out["embeddings_model"] = embed_model or model
        out["embedding_dim"] = len(vectors[0]) if vectors else 0
    except AstroError as exc:
        out.update(embeddings=False, embeddings_model=embed_model or model, embeddings_error=str(exc))
    return out
