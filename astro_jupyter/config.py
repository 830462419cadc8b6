"""Configuration: one traitlets ``Configurable`` shared by the server, the kernel and the CLI.

Every setting can be given as ``c.AstroConfig.<name> = ...`` in ``jupyter_server_config.py``
or ``ipython_config.py``; when it is not, the environment variable named in its help
is used, then the default. Keeping all knobs here is why no module hard-codes a limit.
"""

from __future__ import annotations

import json
import os
import re
import socket
from pathlib import Path
from typing import Any, Callable

from traitlets import Bool, Dict, Enum, Float, Int, List, TraitError, Unicode, default, validate
from traitlets.config import Configurable


def _env(name: str, fallback: str = "") -> str:
    value = os.environ.get(name)
    return value if value is not None and value != "" else fallback


def _env_int(name: str, fallback: int) -> int:
    raw = os.environ.get(name, "").strip()
    try:
        return int(raw) if raw else fallback
    except ValueError:
        return fallback


def _env_float(name: str, fallback: float) -> float:
    raw = os.environ.get(name, "").strip()
    try:
        return float(raw) if raw else fallback
    except ValueError:
        return fallback


def _env_bool(name: str, fallback: bool) -> bool:
    raw = os.environ.get(name, "").strip().lower()
    if not raw:
        return fallback
    return raw in {"1", "true", "yes", "on"}


_READERS: dict[type, Callable[[str, Any], Any]] = {bool: _env_bool, int: _env_int, float: _env_float, str: _env}


def _env_default(trait: str, var: str, fallback: bool | int | float | str) -> Any:
    """A trait's dynamic default: env ``var`` read as the fallback's type, else ``fallback``.

    One line per trait instead of a three-line ``@default`` method for each of ~40 settings.
    """
    read = _READERS[type(fallback)]

    def from_env(self: Configurable) -> Any:
        return read(var, fallback)

    from_env.__name__ = f"_{trait}_default"
    return default(trait)(from_env)


def _tap_services(data: Any) -> dict[str, str]:
    """``tap_services``: {name: http(s) URL}; names lower-cased (they are looked up that way)."""
    if not isinstance(data, dict):
        raise ValueError('tap_services must be a JSON object {"name": "TAP URL"}')
    out: dict[str, str] = {}
    for name, url in data.items():
        if not isinstance(name, str) or not re.match(r"^[A-Za-z0-9_.-]{1,40}$", name.strip()):
            raise ValueError(f"tap_services: {name!r} is not a service name (letters, digits, _ . -)")
        if not isinstance(url, str) or not re.match(r"^https?://[^\s]+$", url.strip(), re.I):
            raise ValueError(f"tap_services[{name!r}] must be an http(s) URL, not {url!r}")
        out[name.strip().lower()] = url.strip()
    return out


class AstroConfig(Configurable):
    """All astro-jupyter settings (env-var fallback named in each ``help``)."""

    # -- places -----------------------------------------------------------------
    home = Unicode(
        help="Library directory holding astro.db, papers/, tool-results/, skills/, team/ (env ASTRO_HOME)."
    ).tag(config=True)

    @default("home")
    def _home_default(self) -> str:
        return _env("ASTRO_HOME", str(Path("~/.astro_jupyter").expanduser()))

    @validate("home")
    def _validate_home(self, proposal: Any) -> str:
        return str(Path(proposal["value"]).expanduser())

    shared_library_url = Unicode(
        help="A PostgreSQL URL (postgresql://user@host/db) for one paper library shared by every user of a hub: "
        "papers, chunks, full-text index and embeddings live there; sessions, notes and memories stay in each "
        "user's own astro.db. Empty: the library is in astro.db (env ASTRO_SHARED_LIBRARY_URL)."
    ).tag(config=True)
    _shared_library_url_default = _env_default("shared_library_url", "ASTRO_SHARED_LIBRARY_URL", "")

    @validate("shared_library_url")
    def _validate_shared_library_url(self, proposal: Any) -> str:
        url = str(proposal["value"] or "").strip()
        if url and not re.match(r"^postgres(?:ql)?://", url, re.I):
            raise TraitError(f"shared_library_url must be a postgresql:// URL, not {url.split('://')[0]!r}://…")
        return url

    shared_library_dir = Unicode(
        help="Directory every hub user can read and write holding the shared library's PDFs and Markdown "
        "(with shared_library_url; default: papers/ under ASTRO_HOME) (env ASTRO_SHARED_LIBRARY_DIR)."
    ).tag(config=True)
    _shared_library_dir_default = _env_default("shared_library_dir", "ASTRO_SHARED_LIBRARY_DIR", "")

    project_root = Unicode(
        help="Root the filesystem tools may read and write besides the library (env ASTRO_PROJECT_ROOT; default: cwd)."
    ).tag(config=True)

    @default("project_root")
    def _project_root_default(self) -> str:
        return _env("ASTRO_PROJECT_ROOT", os.getcwd())

    # -- LLM ----------------------------------------------------------------------
    openai_base_url = Unicode(help="OpenAI-compatible endpoint (env OPENAI_BASE_URL).").tag(config=True)
    _base_url_default = _env_default("openai_base_url", "OPENAI_BASE_URL", "")

    openai_api_key = Unicode(help="API key for the LLM endpoint (env OPENAI_API_KEY).").tag(config=True)
    _api_key_default = _env_default("openai_api_key", "OPENAI_API_KEY", "")

    llm_model = Unicode(help="Chat model (env LLM_MODEL).").tag(config=True)
    _model_default = _env_default("llm_model", "LLM_MODEL", "gpt-4o-mini")

    llm_fallback_model = Unicode(
        help="First model to switch to after repeated overload answers (env LLM_FALLBACK_MODEL)."
    ).tag(config=True)
    _fallback_default = _env_default("llm_fallback_model", "LLM_FALLBACK_MODEL", "")

    llm_fallback_chain = List(
        Unicode(), help="Models rotated through after the fallback model (env LLM_FALLBACK_CHAIN, comma-separated)."
    ).tag(config=True)

    @default("llm_fallback_chain")
    def _chain_default(self) -> list[str]:
        return [m.strip() for m in _env("LLM_FALLBACK_CHAIN").split(",") if m.strip()]

    overload_switch_after = Int(
        3, help="Consecutive overload answers (429/503/529) before switching model."
    ).tag(config=True)

    llm_max_retries = Int(4, help="Retries with backoff for transient LLM errors.").tag(config=True)

    llm_retry_base_delay = Float(
        0.5, help="First backoff delay in seconds (doubles each retry; env ASTRO_LLM_RETRY_DELAY)."
    ).tag(config=True)
    _retry_delay_default = _env_default("llm_retry_base_delay", "ASTRO_LLM_RETRY_DELAY", 0.5)

    llm_timeout_secs = Float(120.0, help="Timeout for one LLM request (env ASTRO_LLM_TIMEOUT).").tag(config=True)
    _llm_timeout_default = _env_default("llm_timeout_secs", "ASTRO_LLM_TIMEOUT", 120.0)

    llm_context_window = Int(
        help="The model's context window in tokens; 0 = ask the endpoint (llama.cpp /props, vLLM /v1/models, Ollama "
        "/api/show), else a table of well-known models (env ASTRO_LLM_CONTEXT_WINDOW)."
    ).tag(config=True)
    _context_window_default = _env_default("llm_context_window", "ASTRO_LLM_CONTEXT_WINDOW", 0)

    llm_max_tokens = Int(
        help="Tokens one answer may generate (sent as max_tokens); 0 = a quarter of the context window, at most "
        "8192 (env ASTRO_LLM_MAX_TOKENS)."
    ).tag(config=True)
    _max_tokens_default = _env_default("llm_max_tokens", "ASTRO_LLM_MAX_TOKENS", 0)

    llm_deadline_secs = Float(
        help="Overall limit on one LLM request, from sending it to the end of its stream; llm_timeout_secs only "
        "bounds each read, so a server sending keep-alive comments could hold a run forever. Counted as a "
        "transient error (retried). 0 disables (env ASTRO_LLM_DEADLINE)."
    ).tag(config=True)
    _llm_deadline_default = _env_default("llm_deadline_secs", "ASTRO_LLM_DEADLINE", 600.0)

    embed_model = Unicode(
        help="Embedding model: an endpoint model name, 'local' (the local-embeddings extra), 'lexical', or empty "
        "for auto: the endpoint's own embedding model, else local, else lexical (env ASTRO_EMBED_MODEL)."
    ).tag(config=True)
    _embed_default = _env_default("embed_model", "ASTRO_EMBED_MODEL", "")

    embed_probe_timeout_secs = Float(
        5.0, help="Seconds to wait for the endpoint's model list when choosing the embedding backend "
        "(env ASTRO_EMBED_PROBE_TIMEOUT); past that, the local or lexical backend is used."
    ).tag(config=True)
    _embed_probe_default = _env_default("embed_probe_timeout_secs", "ASTRO_EMBED_PROBE_TIMEOUT", 5.0)

    embed_threads = Int(
        -1, help="BLAS threads the local embedding model may use: 0 = all cores; negative = auto: one for a query, "
        "for a batch of chunks the cores the load average leaves idle. One is fastest on a shared, busy machine; "
        "more helps a large re-embedding on an idle one (env ASTRO_EMBED_THREADS)."
    ).tag(config=True)
    _embed_threads_default = _env_default("embed_threads", "ASTRO_EMBED_THREADS", -1)

    embed_window_tokens = Int(
        128, help="The local model embeds a passage longer than this many tokens as the mean of windows this "
        "long, each starting with the section path, instead of truncating it at 256 tokens; 128 is the length "
        "all-MiniLM-L6-v2 was trained on. 0 = truncate (env ASTRO_EMBED_WINDOW_TOKENS)."
    ).tag(config=True)
    _embed_window_default = _env_default("embed_window_tokens", "ASTRO_EMBED_WINDOW_TOKENS", 128)

    embed_inline_max = Int(
        64, help="Chunks without a vector that a search embeds before answering; more (a new backend, a big "
        "library) are re-embedded by a background job while searches go on (env ASTRO_EMBED_INLINE_MAX)."
    ).tag(config=True)
    _embed_inline_default = _env_default("embed_inline_max", "ASTRO_EMBED_INLINE_MAX", 64)

    hybrid_vector_weight = Float(
        -1.0, help="Share of the vector similarity in hybrid ranking, 0-1 (the rest is BM25); negative = by backend: "
        "0.5 for a real embedding, hybrid_lexical_weight for lexical-v2 (env ASTRO_HYBRID_VECTOR_WEIGHT)."
    ).tag(config=True)
    _hybrid_weight_default = _env_default("hybrid_vector_weight", "ASTRO_HYBRID_VECTOR_WEIGHT", -1.0)

    hybrid_lexical_weight = Float(
        0.3, help="The vector share in hybrid ranking when the embedding is lexical-v2, a bag of words that mostly "
        "repeats what BM25 sees (env ASTRO_HYBRID_LEXICAL_WEIGHT)."
    ).tag(config=True)
    _hybrid_lexical_default = _env_default("hybrid_lexical_weight", "ASTRO_HYBRID_LEXICAL_WEIGHT", 0.3)

    rerank = Bool(
        True, help="With an LLM, re-rank the top hybrid passages by one batched relevance-scoring call and answer "
        "only from those above rerank_threshold (env ASTRO_RERANK)."
    ).tag(config=True)
    _rerank_default = _env_default("rerank", "ASTRO_RERANK", True)

    rerank_pool = Int(24, help="Hybrid passages sent to the re-ranking call (env ASTRO_RERANK_POOL).").tag(config=True)
    _rerank_pool_default = _env_default("rerank_pool", "ASTRO_RERANK_POOL", 24)

    rerank_threshold = Float(
        5.0, help="Relevance (0-10) a passage needs to be used as evidence (env ASTRO_RERANK_THRESHOLD)."
    ).tag(config=True)
    _rerank_threshold_default = _env_default("rerank_threshold", "ASTRO_RERANK_THRESHOLD", 5.0)

    llm_prices = Dict(
        help="USD per million tokens by model, e.g. {\"gpt-4o-mini\": {\"input\": 0.15, \"output\": 0.6}}, so "
        "each answer in the sidebar and rag_search say what their LLM calls cost (env ASTRO_LLM_PRICES, JSON; tokens "
        "are reported either way, the cost as unknown)."
    ).tag(config=True)

    @default("llm_prices")
    def _llm_prices_default(self) -> dict[str, Any]:
        raw = _env("ASTRO_LLM_PRICES")
        try:
            value = json.loads(raw) if raw else {}
        except ValueError:
            return {}
        return value if isinstance(value, dict) else {}

    rerank_passage_chars = Int(
        900, help="Characters of each passage shown to the re-ranking call (env ASTRO_RERANK_PASSAGE_CHARS)."
    ).tag(config=True)
    _rerank_chars_default = _env_default("rerank_passage_chars", "ASTRO_RERANK_PASSAGE_CHARS", 900)

    # -- hub limits (docs/jupyterhub.md: an administrator sets these for every user) --------------
    allowed_models = List(
        Unicode(),
        help="Models users may pick (the sidebar's model switch, a run's 'model'), as names or globs like "
        "'gpt-4o*'; empty: any model the endpoint serves. The configured llm_model and its fallbacks stay in use "
        "(env ASTRO_ALLOWED_MODELS, comma-separated).",
    ).tag(config=True)

    @default("allowed_models")
    def _allowed_models_default(self) -> list[str]:
        return [m.strip() for m in _env("ASTRO_ALLOWED_MODELS").split(",") if m.strip()]

    max_runs_per_user = Int(
        help="Runs one user may have going at once (sidebar, API, notebook cells and CLI on the same library); "
        "one more is refused with HTTP 429. 0: no limit (env ASTRO_MAX_RUNS_PER_USER)."
    ).tag(config=True)
    _max_runs_default = _env_default("max_runs_per_user", "ASTRO_MAX_RUNS_PER_USER", 0)

    # -- the loop -------------------------------------------------------------------
    max_steps = Int(help="Maximum LLM turns per run (env ASTRO_MAX_STEPS).").tag(config=True)
    _max_steps_default = _env_default("max_steps", "ASTRO_MAX_STEPS", 20)

    tool_timeout_secs = Float(help="Timeout for one tool call in seconds (env ASTRO_TOOL_TIMEOUT).").tag(config=True)
    _tool_timeout_default = _env_default("tool_timeout_secs", "ASTRO_TOOL_TIMEOUT", 300.0)

    max_output_chars = Int(
        help="Tool outputs longer than this are persisted to tool-results/ and replaced by a stub "
        "(env ASTRO_MAX_OUTPUT_CHARS)."
    ).tag(config=True)
    _max_output_default = _env_default("max_output_chars", "ASTRO_MAX_OUTPUT_CHARS", 4000)

    persisted_preview_chars = Int(
        2000, help="How much of a persisted large tool output stays inline as a preview."
    ).tag(config=True)

    duplicate_threshold = Int(
        help="Consecutive identical (tool, arguments) calls that count as a loop (env ASTRO_DUPLICATE_THRESHOLD)."
    ).tag(config=True)
    _dup_default = _env_default("duplicate_threshold", "ASTRO_DUPLICATE_THRESHOLD", 3)

    cancel_poll_secs = Float(0.25, help="How often a running tool checks for cancellation.").tag(config=True)

    event_flush_secs = Float(
        0.1, help="How long a run's events gather before one batch is written to agent_events (live watchers are not delayed)."
    ).tag(config=True)

    stream_slice_ms = Float(
        1.0, help="A run processing a burst of streamed LLM chunks yields the event loop after this many ms, "
        "so requests and other runs are served in between (server latency under load)."
    ).tag(config=True)

    event_id_reserve_block = Int(
        1000, help="Event ids a run reserves in the store per write before watchers see them, so ids never go "
        "backwards after a crash (larger: fewer writes; ids of a crashed run jump by up to this much)."
    ).tag(config=True)

    db_busy_timeout_ms = Int(
        help="How long a write waits for another process's lock on astro.db before failing (env ASTRO_DB_BUSY_TIMEOUT_MS)."
    ).tag(config=True)
    _db_busy_timeout_default = _env_default("db_busy_timeout_ms", "ASTRO_DB_BUSY_TIMEOUT_MS", 10_000)

    # -- filesystem tools -----------------------------------------------------------------
    bash_timeout_secs = Float(help="Default timeout of one run_bash command (env ASTRO_BASH_TIMEOUT).").tag(config=True)
    _bash_timeout_default = _env_default("bash_timeout_secs", "ASTRO_BASH_TIMEOUT", 120.0)

    bash_max_output_chars = Int(
        30_000, help="run_bash keeps the head and tail of longer output, dropping the middle."
    ).tag(config=True)

    fs_max_file_bytes = Int(
        20_000_000, help="read_file and grep_files skip files larger than this many bytes."
    ).tag(config=True)

    max_prompt_chars = Int(100_000, help="Longest prompt accepted from a user.").tag(config=True)

    # -- notebook tools ---------------------------------------------------------------------
    notebook_cell_max_chars = Int(
        3000, help="notebook_read/notebook_run cut each cell's source and each output at this many characters."
    ).tag(config=True)
    notebook_traceback_frames = Int(
        3, help="How many of an error's last traceback entries the notebook tools show the model."
    ).tag(config=True)
    notebook_run_timeout_secs = Float(
        help="Longest one notebook_run cell may execute (env ASTRO_NOTEBOOK_RUN_TIMEOUT)."
    ).tag(config=True)
    _nb_run_timeout_default = _env_default("notebook_run_timeout_secs", "ASTRO_NOTEBOOK_RUN_TIMEOUT", 600.0)

    notebook_kernel_startup_secs = Float(60.0, help="How long notebook_run waits for a notebook's kernel to start.").tag(config=True)
    notebook_bridge_timeout_secs = Float(
        help="How long a sidebar run waits for the sidebar to apply a notebook edit/run to the open document "
        "(env ASTRO_NOTEBOOK_BRIDGE_TIMEOUT)."
    ).tag(config=True)
    _nb_bridge_timeout_default = _env_default("notebook_bridge_timeout_secs", "ASTRO_NOTEBOOK_BRIDGE_TIMEOUT", 60.0)

    kernel_inspect_max_chars = Int(4000, help="kernel_inspect cuts one summary at this many characters.").tag(config=True)
    kernel_inspect_max_vars = Int(200, help="kernel_inspect without a name lists at most this many variables.").tag(config=True)
    kernel_run_max_output_chars = Int(
        20_000, help="kernel_run keeps at most this many characters of stdout and of stderr for the model."
    ).tag(config=True)

    # -- permissions ------------------------------------------------------------------
    permission_mode = Enum(
        ["auto", "ask", "deny"],
        help="auto: read-only tools never ask; ask: Ask rules always ask; deny: every Ask is denied "
        "(env ASTRO_PERMISSION_MODE).",
    ).tag(config=True)

    @default("permission_mode")
    def _mode_default(self) -> str:
        mode = _env("ASTRO_PERMISSION_MODE", "auto")
        return mode if mode in {"auto", "ask", "deny"} else "auto"

    permission_rules = List(
        Dict(),
        help='Rules like {"action": "deny"|"allow"|"ask", "tool": "run_bash"|"*", "reason": "..."} '
        "(env ASTRO_PERMISSION_RULES as JSON).",
    ).tag(config=True)

    @default("permission_rules")
    def _rules_default(self) -> list[dict[str, Any]]:
        import json

        raw = _env("ASTRO_PERMISSION_RULES")
        if not raw:
            return []
        try:
            rules = json.loads(raw)
        except ValueError:
            return []
        return [r for r in rules if isinstance(r, dict)] if isinstance(rules, list) else []

    permission_timeout_secs = Float(300.0, help="How long a permission question waits for an answer.").tag(config=True)

    unattended_allow = List(
        Unicode(),
        help="Tools allowed without asking when no one can answer (a notebook run by nbconvert, nbclient or "
        "papermill), e.g. ['notebook_edit', 'kernel_run']; every other question is then denied at once. "
        "Deny rules still win. Adds to %%astro --allow (env ASTRO_UNATTENDED_ALLOW, comma-separated).",
    ).tag(config=True)

    @default("unattended_allow")
    def _unattended_allow_default(self) -> list[str]:
        return [name.strip() for name in _env("ASTRO_UNATTENDED_ALLOW").split(",") if name.strip()]

    fs_protected_paths = List(
        Unicode(),
        help="More paths (absolute) or globs (on the full path or the file name) the file tools may neither read "
        "nor write, whatever the permission rules; added to the built-in deny list "
        "(env ASTRO_FS_PROTECTED, separated by the OS path separator).",
    ).tag(config=True)

    @default("fs_protected_paths")
    def _protected_default(self) -> list[str]:
        return [p for p in _env("ASTRO_FS_PROTECTED").split(os.pathsep) if p.strip()]

    fs_secret_names = List(
        Unicode(),
        [".ssh", ".gnupg", ".aws", ".azure", ".kube", ".docker", ".netrc", ".pgpass", ".git-credentials", ".npmrc",
         ".pypirc", ".env", ".env.*", ".envrc", ".config", ".local", ".jupyter", ".ipython", ".password-store",
         ".vault-token", ".mozilla", ".*history"],
        help="Dotfile/dot-directory names (globs) where credentials live: the file tools may not even read them. "
        "(Writing any dotfile is refused regardless.)",
    ).tag(config=True)

    prompt_width = Int(
        help="Columns a permission prompt wraps at when the terminal width is unknown, e.g. in a notebook "
        "(env ASTRO_PROMPT_WIDTH)."
    ).tag(config=True)

    @default("prompt_width")
    def _prompt_width_default(self) -> int:
        return max(40, _env_int("ASTRO_PROMPT_WIDTH", 100))

    ask_user_timeout_secs = Float(
        help="How long ask_user waits for an answer (env ASTRO_ASK_USER_TIMEOUT)."
    ).tag(config=True)
    _ask_default = _env_default("ask_user_timeout_secs", "ASTRO_ASK_USER_TIMEOUT", 300.0)

    # -- hooks ----------------------------------------------------------------------------
    command_hooks = List(
        Dict(),
        help='Shell hooks: {"event": "PreToolUse", "command": "...", "matcher": "tool name or *", '
        '"timeout": 10}. The event arrives as JSON on stdin; JSON on stdout may answer.',
    ).tag(config=True)

    hook_timeout_secs = Float(10.0, help="Default timeout of a command hook.").tag(config=True)

    # -- MCP servers others publish (astro_jupyter/mcp/client.py) -----------------------------
    mcp_servers = Dict(
        help='Outside MCP servers whose tools the agent may use, by name: {"name": {"command": "...", "args": [...], '
        '"env": {...}, "timeout": 60}} or {"name": {"url": "http://...", "headers": {...}}}. Servers listed in '
        'jupyter-ai\'s file `.jupyter/mcp_settings.json` under project_root are added. Started on first use; every '
        'call asks unless a permission rule allows "mcp__NAME__*" or one tool.',
    ).tag(config=True)

    # -- external services --------------------------------------------------------------
    ads_url = Unicode(help="NASA ADS API base (env ASTRO_ADS_URL).").tag(config=True)
    _ads_default = _env_default("ads_url", "ASTRO_ADS_URL", "https://api.adsabs.harvard.edu/v1")

    ads_token = Unicode(help="NASA ADS API token (env ADS_API_TOKEN).").tag(config=True)
    _ads_token_default = _env_default("ads_token", "ADS_API_TOKEN", "")

    arxiv_url = Unicode(help="arXiv API query endpoint (env ASTRO_ARXIV_URL).").tag(config=True)
    _arxiv_default = _env_default("arxiv_url", "ASTRO_ARXIV_URL", "http://export.arxiv.org/api/query")

    arxiv_min_interval_secs = Float(
        help="Minimum seconds between requests to arXiv (env ASTRO_ARXIV_INTERVAL)."
    ).tag(config=True)
    _arxiv_interval_default = _env_default("arxiv_min_interval_secs", "ASTRO_ARXIV_INTERVAL", 3.0)

    arxiv_pdf_url = Unicode(help="arXiv PDF base, the id is appended (env ASTRO_ARXIV_PDF_URL).").tag(config=True)
    _arxiv_pdf_default = _env_default("arxiv_pdf_url", "ASTRO_ARXIV_PDF_URL", "https://arxiv.org/pdf")

    sesame_url = Unicode(help="CDS Sesame resolver base (env ASTRO_SESAME_URL).").tag(config=True)
    _sesame_default = _env_default("sesame_url", "ASTRO_SESAME_URL", "https://cds.unistra.fr/cgi-bin/nph-sesame")

    http_timeout_secs = Float(help="Timeout for ADS/arXiv/Sesame requests (env ASTRO_HTTP_TIMEOUT).").tag(config=True)
    _http_timeout_default = _env_default("http_timeout_secs", "ASTRO_HTTP_TIMEOUT", 30.0)

    allow_private_downloads = Bool(
        help="Let download_paper fetch from loopback/private/link-local hosts (env ASTRO_ALLOW_PRIVATE_DOWNLOADS)."
    ).tag(config=True)
    _private_default = _env_default("allow_private_downloads", "ASTRO_ALLOW_PRIVATE_DOWNLOADS", False)

    doi_resolver_url = Unicode(help="DOI resolver base, the DOI is appended (env ASTRO_DOI_URL).").tag(config=True)
    _doi_resolver_default = _env_default("doi_resolver_url", "ASTRO_DOI_URL", "https://doi.org")

    download_max_bytes = Int(
        help="Largest PDF download_paper accepts, in bytes (env ASTRO_DOWNLOAD_MAX_BYTES)."
    ).tag(config=True)
    _download_max_default = _env_default("download_max_bytes", "ASTRO_DOWNLOAD_MAX_BYTES", 200 * 1024 * 1024)

    download_allowed_hosts = List(
        Unicode(),
        help="Host names download_paper may fetch even when they resolve to private addresses, e.g. an "
        "institutional mirror (env ASTRO_DOWNLOAD_ALLOWED_HOSTS, comma-separated). Redirects are checked again.",
    ).tag(config=True)

    @default("download_allowed_hosts")
    def _download_hosts_default(self) -> list[str]:
        return [h.strip().lower() for h in _env("ASTRO_DOWNLOAD_ALLOWED_HOSTS").split(",") if h.strip()]

    tap_services = Dict(
        help='TAP services of your own, trusted like the built-in ones (simbad, vizier, gaia ...), loopback '
        'included: {"name": "TAP URL"} (env ASTRO_TAP_SERVICES, the same JSON). A name may override a built-in.',
    ).tag(config=True)

    @default("tap_services")
    def _tap_services_default(self) -> dict[str, str]:
        raw = _env("ASTRO_TAP_SERVICES")
        try:
            return _tap_services(json.loads(raw)) if raw.strip() else {}
        except ValueError as exc:
            raise TraitError(f"ASTRO_TAP_SERVICES: {exc}") from exc

    @validate("tap_services")
    def _validate_tap_services(self, proposal: Any) -> dict[str, str]:
        try:
            return _tap_services(proposal["value"])
        except ValueError as exc:
            raise TraitError(str(exc)) from exc

    # -- orchestration --------------------------------------------------------------------
    subagent_max_steps = Int(5, help="Default max_steps of a subagent (at most subagent_step_limit).").tag(config=True)
    subagent_step_limit = Int(10, help="Hard ceiling on a subagent's max_steps.").tag(config=True)
    coordinator_workers = Int(4, help="Worker-pool size in coordinator mode.").tag(config=True)
    coordinator_task_timeout_secs = Float(600.0, help="Timeout of one delegated task.").tag(config=True)

    # -- context compaction -----------------------------------------------------------------
    context_soft_limit_tokens = Int(
        help="Estimated prompt tokens above which older messages are summarised (env ASTRO_CONTEXT_SOFT_LIMIT)."
    ).tag(config=True)
    _soft_limit_default = _env_default("context_soft_limit_tokens", "ASTRO_CONTEXT_SOFT_LIMIT", 80_000)

    micro_compact_ratio = Float(
        0.6, help="Old tool results become placeholders once the estimate passes this share of the soft limit."
    ).tag(config=True)
    micro_compact_keep_recent = Int(4, help="Most recent tool results micro-compaction leaves intact.").tag(config=True)
    compaction_keep_recent_messages = Int(
        6, help="Most recent messages kept verbatim when older ones are summarised."
    ).tag(config=True)
    compaction_breaker_threshold = Int(
        3, help="Consecutive automatic-compaction failures that open the circuit breaker."
    ).tag(config=True)
    compaction_restore_files = Int(3, help="Recently read files re-inserted after a compaction.").tag(config=True)
    compaction_restore_chars = Int(4000, help="Characters of each restored file.").tag(config=True)
    compaction_memory_bridge = Bool(
        True, help="Let a restricted subagent save durable memories from messages dropped by compaction."
    ).tag(config=True)
    memory_jaccard_threshold = Float(
        0.7, help="A new memory whose word set overlaps a stored one at least this much (Jaccard) is a duplicate."
    ).tag(config=True)
    history_search_window = Int(
        help="History search ranks (BM25) the newest this-many matches; older ones come as \"more results\" "
        "(env ASTRO_HISTORY_SEARCH_WINDOW). Bounds a search's cost however common the words are."
    ).tag(config=True)
    _history_search_window_default = _env_default("history_search_window", "ASTRO_HISTORY_SEARCH_WINDOW", 200)

    history_search_scan_limit = Int(
        help="Most matches one history-search request examines while filters (session, owner) skip them; "
        "past it the page ends early with a cursor to continue (env ASTRO_HISTORY_SEARCH_SCAN_LIMIT)."
    ).tag(config=True)
    _history_search_scan_limit_default = _env_default("history_search_scan_limit", "ASTRO_HISTORY_SEARCH_SCAN_LIMIT", 20000)

    @validate("history_search_window", "history_search_scan_limit")
    def _validate_history_search(self, proposal: Any) -> int:
        if proposal["value"] < 1:
            raise TraitError(f"{proposal['trait'].name} must be at least 1")
        return int(proposal["value"])

    # -- server extension -------------------------------------------------------------------
    sse_keepalive_secs = Float(help="Seconds between SSE keep-alive comments (env ASTRO_SSE_KEEPALIVE).").tag(config=True)
    _sse_keepalive_default = _env_default("sse_keepalive_secs", "ASTRO_SSE_KEEPALIVE", 15.0)

    replay_page_events = Int(
        help="Stored events read per page when the sidebar reopens a session (consecutive text deltas are "
        "folded before they are sent) (env ASTRO_REPLAY_PAGE_EVENTS)."
    ).tag(config=True)
    _replay_page_events_default = _env_default("replay_page_events", "ASTRO_REPLAY_PAGE_EVENTS", 50000)

    sse_batch_ms = Float(
        help="While events keep coming, an SSE stream sends at most one batch per this many ms (the first event "
        "after a pause goes at once): fewer writes and wake-ups per event on a busy server. 0: every event at once "
        "(env ASTRO_SSE_BATCH_MS)."
    ).tag(config=True)
    _sse_batch_ms_default = _env_default("sse_batch_ms", "ASTRO_SSE_BATCH_MS", 30.0)

    sse_merge_backlog = Int(
        help="When at least this many events queued up for an SSE reader (a slow client, a long replay), "
        "consecutive text/thinking deltas go out as one delta event (same type, every character in order, the id "
        "of the last merged); a reader that keeps up sees each event. 0: never merge (env ASTRO_SSE_MERGE_BACKLOG)."
    ).tag(config=True)
    _sse_merge_backlog_default = _env_default("sse_merge_backlog", "ASTRO_SSE_MERGE_BACKLOG", 64)

    intake_rate_per_minute = Int(
        help="Bookmarklet intake requests accepted per token per minute (env ASTRO_INTAKE_RATE)."
    ).tag(config=True)
    _intake_rate_default = _env_default("intake_rate_per_minute", "ASTRO_INTAKE_RATE", 30)

    strict_login_cookie = Bool(
        help="The server extension makes Jupyter's login cookie HttpOnly + SameSite=Strict unless "
        "c.IdentityProvider.cookie_options says otherwise (env ASTRO_STRICT_LOGIN_COOKIE)."
    ).tag(config=True)
    _strict_cookie_default = _env_default("strict_login_cookie", "ASTRO_STRICT_LOGIN_COOKIE", True)

    # -- derived paths --------------------------------------------------------------------
    @property
    def home_path(self) -> Path:
        return Path(self.home)

    @property
    def db_path(self) -> Path:
        return self.home_path / "astro.db"

    @property
    def papers_dir(self) -> Path:
        """Where PDFs and parsed Markdown live: the shared directory when the library is shared."""
        if self.shared_library_url and self.shared_library_dir:
            return Path(self.shared_library_dir).expanduser()
        return self.home_path / "papers"

    @property
    def staging_dir(self) -> Path:
        """Partial downloads and copies, beside ``papers_dir`` (same filesystem: moved in atomically)."""
        if self.shared_library_url and self.shared_library_dir:
            # per host: a partial file is swept when its writer's pid is gone, and pids are per host
            return self.papers_dir / ".partial-downloads" / socket.gethostname()
        return self.home_path / ".partial-downloads"

    @property
    def tool_results_dir(self) -> Path:
        return self.home_path / "tool-results"

    @property
    def skills_dir(self) -> Path:
        return self.home_path / "skills"

    @property
    def notes_dir(self) -> Path:
        """The agent's own Markdown notes: file_write may write here without asking (skills/ asks)."""
        return self.home_path / "notes"

    @property
    def team_dir(self) -> Path:
        return self.home_path / "team"

    def ensure_dirs(self) -> None:
        """Create the library layout; cheap and idempotent, so every entry point calls it."""
        for path in (self.home_path, self.papers_dir, self.tool_results_dir, self.skills_dir, self.team_dir):
            path.mkdir(parents=True, exist_ok=True)

    @property
    def llm_configured(self) -> bool:
        return bool(self.openai_base_url or self.openai_api_key)
