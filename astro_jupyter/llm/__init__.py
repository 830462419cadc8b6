"""The LLM client (openai.AsyncOpenAI streaming + fallback models) and its stream item types."""

from .client import LlmClient
from .fallback import FallbackPolicy, ModelHolder
from .types import Completed, ModelSwitched, StreamItem, TextChunk, ThinkingChunk, ToolCallReady

__all__ = [
    "Completed",
    "FallbackPolicy",
    "LlmClient",
    "ModelHolder",
    "ModelSwitched",
    "StreamItem",
    "TextChunk",
    "ThinkingChunk",
    "ToolCallReady",
]
