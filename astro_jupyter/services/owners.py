"""Per-owner folders inside the library: one layout for tool results, teams and skills.

An ownerless run (the kernel, the CLI, the shared-token user of the server) uses the folder
itself; a named identity (JupyterHub, a custom IdentityProvider) uses ``<folder>/owners/<key>/``.
The key is readable, file-system safe and distinct per owner (a hash of the full name), so
two users whose names clean to the same stem still get two folders. The file tools' deny
list (``agent/tools/filesystem/protected.py``) shuts the other owners' folders.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

OWNERS_DIR = "owners"


def owner_key(owner: str) -> str:
    """The folder name of ``owner`` under ``<folder>/owners/``."""
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", owner).lstrip(".")[:120] or "call"
    digest = hashlib.sha256(owner.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{stem[:48].strip('_') or 'user'}-{digest}"


def owner_dir(base: Path, owner: str | None) -> Path:
    """``base`` for an ownerless run, ``base/owners/<key>`` for a named identity."""
    return Path(base) / OWNERS_DIR / owner_key(owner) if owner else Path(base)
