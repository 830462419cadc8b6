"""What the model behind the endpoint can take: its context window and how long one answer may be.

Why: a local model has a 4k–32k context where a cloud model has 128k, and a model that does not
stop generates until the server gives up. Every request carries ``max_tokens`` from the profile,
and compaction starts from the profile's window instead of one threshold for every model.

The window is read where the endpoint says it (llama.cpp ``GET /props`` ``n_ctx``, vLLM's
``max_model_len`` in ``/v1/models``, Ollama ``POST /api/show``), else from a table of well-known
models, else a conservative default; ``AstroConfig.llm_context_window`` overrides all of them.
A context-length error from the server teaches the real window too (:func:`window_from_error`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

DEFAULT_CONTEXT_WINDOW = 32_768  # an unknown model: small enough for most local servers' defaults
MAX_OUTPUT_CAP = 8_192  # one answer's default bound on a large model
MIN_OUTPUT = 256
COMPACT_SHARE = 0.75  # compaction starts at this share of the prompt budget (the summary call needs room)
OLLAMA_DEFAULT_NUM_CTX = 4_096  # what Ollama serves a model with when no num_ctx is set

# Well-known models (name prefix, lower case → context window); the first match wins, so longer first.
KNOWN_WINDOWS: tuple[tuple[str, int], ...] = (
    ("gpt-4o", 128_000), ("gpt-4.1", 1_047_576), ("gpt-4-turbo", 128_000), ("gpt-4-32k", 32_768),
    ("gpt-4", 8_192), ("gpt-3.5-turbo", 16_385), ("gpt-5", 400_000), ("o1", 200_000), ("o3", 200_000),
    ("o4", 200_000), ("claude", 200_000), ("gemini", 1_000_000), ("llama-3.1", 131_072),
    ("llama-3.2", 131_072), ("llama-3.3", 131_072), ("llama3.1", 131_072), ("llama3.2", 131_072),
    ("llama3.3", 131_072), ("llama-3", 8_192), ("llama3", 8_192), ("llama-2", 4_096), ("llama2", 4_096),
    ("qwen2.5", 32_768), ("qwen3", 32_768), ("qwen2", 32_768), ("mistral-nemo", 131_072),
    ("mistral-small", 32_768), ("mistral", 32_768), ("mixtral", 32_768), ("gemma-3", 131_072),
    ("gemma3", 131_072), ("gemma-2", 8_192), ("gemma2", 8_192), ("gemma", 8_192), ("phi-3", 4_096),
    ("phi3", 4_096), ("phi-4", 16_384), ("phi4", 16_384), ("deepseek", 65_536),
)


@dataclass(frozen=True)
class ModelProfile:
    """One model's limits and where the window came from (said by ``doctor`` and in errors)."""

    model: str
    context_window: int
    max_output_tokens: int
    source: str

    @property
    def prompt_budget(self) -> int:
        """Tokens the prompt (messages + tool schemas) may take and still leave room for the answer."""
        return max(256, self.context_window - self.max_output_tokens)

    @property
    def compact_at(self) -> int:
        """Estimated prompt tokens above which older messages are summarised."""
        return int(self.prompt_budget * COMPACT_SHARE)

    def with_window(self, window: int, source: str, max_tokens: int = 0) -> "ModelProfile":
        return replace(self, context_window=window, source=source,
                       max_output_tokens=output_bound(window, max_tokens))


def output_bound(window: int, setting: int = 0) -> int:
    """``max_tokens`` for one answer: the setting, else a quarter of the window (at most 8k); never
    more than half the window, so a prompt always has room."""
    bound = setting if setting > 0 else max(MIN_OUTPUT, min(MAX_OUTPUT_CAP, window // 4))
    return max(16, min(bound, window // 2))


def make_profile(model: str, window: int, source: str, max_tokens: int = 0) -> ModelProfile:
    return ModelProfile(model, window, output_bound(window, max_tokens), source)


def known_window(model: str) -> int | None:
    """The table's window for ``model`` (a path or ``org/`` prefix and a ``:tag`` are ignored)."""
    name = model.lower().rsplit("/", 1)[-1]
    for prefix, window in KNOWN_WINDOWS:
        if name.startswith(prefix):
            return window
    return None


def _positive(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def window_from_models(data: Any, model: str) -> int | None:
    """vLLM: ``max_model_len`` on the model's entry in ``GET /v1/models``."""
    entries = data.get("data") if isinstance(data, dict) else None
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, dict) and entry.get("id") == model:
            return _positive(entry.get("max_model_len"))
    return None


def window_from_props(data: Any) -> int | None:
    """llama.cpp: ``GET /props`` → ``default_generation_settings.n_ctx`` (the context of one slot)."""
    if not isinstance(data, dict):
        return None
    settings = data.get("default_generation_settings")
    if isinstance(settings, dict) and _positive(settings.get("n_ctx")):
        return settings["n_ctx"]
    return _positive(data.get("n_ctx"))


_NUM_CTX = re.compile(r"^\s*num_ctx\s+(\d+)\s*$", re.MULTILINE)


def window_from_ollama(data: Any) -> tuple[int, str] | None:
    """Ollama: ``POST /api/show``. It serves ``num_ctx`` tokens (the Modelfile's parameter, else its
    default), whatever longer ``<arch>.context_length`` the model was trained for."""
    if not isinstance(data, dict):
        return None
    params = data.get("parameters")
    match = _NUM_CTX.search(params) if isinstance(params, str) else None
    if match and int(match.group(1)) > 0:
        return int(match.group(1)), "Ollama /api/show num_ctx"
    info = data.get("model_info")
    trained = None
    if isinstance(info, dict):
        trained = next((_positive(v) for k, v in info.items() if k.endswith(".context_length") and _positive(v)), None)
    if trained is None:
        return None
    return min(trained, OLLAMA_DEFAULT_NUM_CTX), (
        f"Ollama /api/show: trained for {trained}, served with the default num_ctx "
        f"{OLLAMA_DEFAULT_NUM_CTX} unless OLLAMA_CONTEXT_LENGTH or a Modelfile num_ctx says otherwise")


_OVERFLOW = re.compile(
    r"context[_ ]length[_ ]exceeded|maximum context length|exceeds? the available context size|"
    r"exceed_context_size|maximum model length|context window (?:is )?(?:exceeded|too small)|"
    r"prompt is too long|too many tokens|input is too long for (?:the|this) model",
    re.IGNORECASE,
)
_LIMIT = re.compile(r"maximum context length is (\d+)|\"?n_ctx\"?\s*[:=]\s*(\d+)|maximum model length (?:of |is )?(\d+)",
                    re.IGNORECASE)


def is_overflow(message: str) -> bool:
    """Whether an endpoint's error says the prompt does not fit the context (OpenAI, vLLM, llama.cpp)."""
    return bool(_OVERFLOW.search(message or ""))


def window_from_error(message: str) -> int | None:
    """The window a context-length error names ("maximum context length is 4096 tokens", ``n_ctx``)."""
    match = _LIMIT.search(message or "")
    if match is None:
        return None
    return int(next(g for g in match.groups() if g))
