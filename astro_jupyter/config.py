"""Configuration: one traitlets ``Configurable`` shared by the server, the kernel and the CLI.

Every setting can be given as ``c.AstroConfig.<name> = ...`` in ``jupyter_server_config.py``
or ``ipython_config.py``; when it is not, the environment variable named in its help
is used, then the default. Only what a person sets is here (issue 23: at most 30 settings);
a tuning knob is a named constant or a frozen value object beside the code it tunes.
"""

from __future__ import annotations

import json
import os
import re
import socket
from pathlib import Path
from typing import Any, Callable

from traitlets import Dict, Enum, Float, Int, List, TraitError, Unicode, default, validate
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


# name -> (env var, built-in address) of the services ``service_urls`` may point elsewhere
SERVICE_URLS: dict[str, tuple[str, str]] = {
    "ads": ("ASTRO_ADS_URL", "https://api.adsabs.harvard.edu/v1"),
    "arxiv": ("ASTRO_ARXIV_URL", "http://export.arxiv.org/api/query"),
    "arxiv_pdf": ("ASTRO_ARXIV_PDF_URL", "https://arxiv.org/pdf"),
    "sesame": ("ASTRO_SESAME_URL", "https://cds.unistra.fr/cgi-bin/nph-sesame"),
    "doi": ("ASTRO_DOI_URL", "https://doi.org"),
}


def _service_urls(data: Any) -> dict[str, str]:
    """``service_urls``: the built-in addresses with the ones given replacing theirs (unknown names refused)."""
    if not isinstance(data, dict):
        raise ValueError('service_urls must be a JSON object {"ads": "https://..."}')
    out = {name: _env(var, url) for name, (var, url) in SERVICE_URLS.items()}
    for name, url in data.items():
        if name not in SERVICE_URLS:
            raise ValueError(f"service_urls: unknown service {name!r} (known: {', '.join(SERVICE_URLS)})")
        if not isinstance(url, str) or not re.match(r"^https?://[^\s]+$", url.strip(), re.I):
            raise ValueError(f"service_urls[{name!r}] must be an http(s) URL, not {url!r}")
        out[name] = url.strip()
    return out


class AstroConfig(Configurable):
    """The settings a person sets (env-var fallback named in each ``help``).

    Internal tuning (retries, batch sizes, cut-offs) is not here: it lives as module constants or
    small frozen value objects next to the code that uses it (``llm.client.LlmLimits``,
    ``services.rag.RagTuning``, ...), which tests pass to constructors (``services.container.Tuning``).
    """

    def __init__(self, **kwargs: Any) -> None:
        unknown = set(kwargs) - set(self.class_traits(config=True)) - {"config", "parent", "log"}
        if unknown:  # traitlets would drop them with a warning: a removed setting must not pass silently
            raise TypeError(f"AstroConfig has no setting {', '.join(sorted(unknown))}")
        super().__init__(**kwargs)

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

    llm_timeout_secs = Float(120.0, help="Timeout for one LLM request (env ASTRO_LLM_TIMEOUT).").tag(config=True)
    _llm_timeout_default = _env_default("llm_timeout_secs", "ASTRO_LLM_TIMEOUT", 120.0)

    llm_context_window = Int(
        help="The model's context window in tokens; 0 = ask the endpoint (llama.cpp /props, vLLM /v1/models, Ollama "
        "/api/show), else a table of well-known models (env ASTRO_LLM_CONTEXT_WINDOW)."
    ).tag(config=True)
    _context_window_default = _env_default("llm_context_window", "ASTRO_LLM_CONTEXT_WINDOW", 0)

    embed_model = Unicode(
        help="Embedding model: an endpoint model name, 'local' (the local-embeddings extra), 'lexical', or empty "
        "for auto: the endpoint's own embedding model, else local, else lexical (env ASTRO_EMBED_MODEL)."
    ).tag(config=True)
    _embed_default = _env_default("embed_model", "ASTRO_EMBED_MODEL", "")

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
    max_steps = Int(help="Maximum LLM turns per run, 1-200 (env ASTRO_MAX_STEPS).").tag(config=True)
    _max_steps_default = _env_default("max_steps", "ASTRO_MAX_STEPS", 20)

    @validate("max_steps")
    def _validate_max_steps(self, proposal: Any) -> int:
        if not 1 <= proposal["value"] <= 200:  # the bound app/runs.py holds every front end's request to
            raise TraitError(f"max_steps must be from 1 to 200, not {proposal['value']}")
        return int(proposal["value"])

    tool_timeout_secs = Float(help="Timeout for one tool call in seconds (env ASTRO_TOOL_TIMEOUT).").tag(config=True)
    _tool_timeout_default = _env_default("tool_timeout_secs", "ASTRO_TOOL_TIMEOUT", 300.0)


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
        help="More dotfile/dot-directory names (globs) where credentials live, which the file tools may not even "
        "read; added to the built-in list (SECRET_NAMES in agent/tools/filesystem/protected.py); writing any "
        "dotfile is refused regardless",
    ).tag(config=True)

    # -- hooks ----------------------------------------------------------------------------
    command_hooks = List(
        Dict(),
        help='Shell hooks: {"event": "PreToolUse", "command": "...", "matcher": "tool name or *", '
        '"timeout": 10}. The event arrives as JSON on stdin; JSON on stdout may answer.',
    ).tag(config=True)

    # -- MCP servers others publish (astro_jupyter/mcp/client.py) -----------------------------
    mcp_servers = Dict(
        help='Outside MCP servers whose tools the agent may use, by name: {"name": {"command": "...", "args": [...], '
        '"env": {...}, "timeout": 60}} or {"name": {"url": "http://...", "headers": {...}}}. Servers listed in '
        'jupyter-ai\'s file `.jupyter/mcp_settings.json` under project_root are added. Started on first use; every '
        'call asks unless a permission rule allows "mcp__NAME__*" or one tool.',
    ).tag(config=True)

    # -- external services --------------------------------------------------------------
    service_urls = Dict(
        help="Where the outside services are, by name; names given here replace the built-in address, the "
        "others keep theirs: ads (NASA ADS API), arxiv (arXiv API query), arxiv_pdf (arXiv PDFs, the id is "
        "appended), sesame (CDS Sesame resolver), doi (DOI resolver, the DOI is appended). Environment: one "
        "variable per service, ASTRO_ADS_URL, ASTRO_ARXIV_URL, ASTRO_ARXIV_PDF_URL, ASTRO_SESAME_URL, ASTRO_DOI_URL."
    ).tag(config=True)

    @default("service_urls")
    def _service_urls_default(self) -> dict[str, str]:
        return {name: _env(var, url) for name, (var, url) in SERVICE_URLS.items()}

    @validate("service_urls")
    def _validate_service_urls(self, proposal: Any) -> dict[str, str]:
        try:
            return _service_urls(proposal["value"])
        except ValueError as exc:
            raise TraitError(str(exc)) from exc

    ads_token = Unicode(help="NASA ADS API token (env ADS_API_TOKEN).").tag(config=True)
    _ads_token_default = _env_default("ads_token", "ADS_API_TOKEN", "")

    download_max_bytes = Int(
        help="Largest PDF download_paper accepts, in bytes (env ASTRO_DOWNLOAD_MAX_BYTES)."
    ).tag(config=True)
    _download_max_default = _env_default("download_max_bytes", "ASTRO_DOWNLOAD_MAX_BYTES", 200 * 1024 * 1024)

    download_allowed_hosts = List(
        Unicode(),
        help="Host names (or IP addresses) download_paper may fetch even when they resolve to private, loopback "
        "or link-local addresses, e.g. an institutional mirror (env ASTRO_DOWNLOAD_ALLOWED_HOSTS, "
        "comma-separated). Redirects are checked again.",
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
    coordinator_workers = Int(4, help="Worker-pool size in coordinator mode.").tag(config=True)

    # -- the built-in service addresses (service_urls) -------------------------------------
    @property
    def ads_url(self) -> str:
        return self.service_urls["ads"]

    @property
    def arxiv_url(self) -> str:
        return self.service_urls["arxiv"]

    @property
    def arxiv_pdf_url(self) -> str:
        return self.service_urls["arxiv_pdf"]

    @property
    def sesame_url(self) -> str:
        return self.service_urls["sesame"]

    @property
    def doi_resolver_url(self) -> str:
        return self.service_urls["doi"]

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
