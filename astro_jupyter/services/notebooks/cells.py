"""Pure notebook operations: cell ids, insert/replace/delete, and the text the model reads.

Everything here works on an in-memory ``nbformat`` v4 notebook and does no I/O, so the
file store (kernel, CLI), the server's ContentsManager and the sidebar bridge all share
the same rules. Outputs are rendered as the model needs them: streams and ``text/plain``
as text, errors with their traceback's last frames, images as ``[image/png 640×480]``,
each cell cut at a configurable length.
"""

from __future__ import annotations

import base64
import hashlib
import re
import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ...errors import NotebookError

if TYPE_CHECKING:
    from nbformat import NotebookNode

CELL_TYPES = ("code", "markdown")
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_CELL_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")  # nbformat 4.5's pattern


@dataclass(frozen=True)
class RenderLimits:
    """How much of a notebook the model gets (internal tuning; tests set ``NotebookService.limits``)."""

    cell_chars: int = 3000
    traceback_frames: int = 3


def new_notebook(kernel_name: str = "python3") -> "NotebookNode":
    import nbformat.v4 as nbf

    nb = nbf.new_notebook()
    nb.metadata["kernelspec"] = {"name": kernel_name, "display_name": "Python 3", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    return nb


def ensure_ids(nb: "NotebookNode") -> bool:
    """Give cells without an id a stable one (nbformat < 4.5 files); True if anything changed.

    The id is derived from the cell's position and source, so reading the same file twice
    names its cells the same way, and the first edit stores these ids for good.
    """
    changed = False
    seen: set[str] = set()
    for index, cell in enumerate(nb.cells):
        cid = cell.get("id")
        if not isinstance(cid, str) or not _CELL_ID.match(cid) or cid in seen:
            digest = hashlib.sha1(f"{index}:{_source(cell)}".encode("utf-8", "surrogatepass")).hexdigest()
            cid = f"c{digest[:8]}"
            while cid in seen:
                cid = f"c{hashlib.sha1(cid.encode()).hexdigest()[:8]}"
            cell["id"] = cid
            changed = True
        seen.add(cid)
    if changed or nb.get("nbformat_minor", 0) < 5:
        nb["nbformat"], nb["nbformat_minor"] = 4, max(5, int(nb.get("nbformat_minor") or 0))
    return changed


def _source(cell: Any) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else str(src or "")


def find_cell(nb: "NotebookNode", cell_id: str) -> int:
    for index, cell in enumerate(nb.cells):
        if cell.get("id") == cell_id:
            return index
    known = ", ".join(str(c.get("id")) for c in nb.cells[:30]) or "(the notebook has no cells)"
    raise NotebookError(f"no cell with id {cell_id!r}; the cells are: {known}")


def make_cell(cell_type: str, source: str) -> "NotebookNode":
    import nbformat.v4 as nbf

    if cell_type not in CELL_TYPES:
        raise NotebookError(f"cell_type must be 'code' or 'markdown', not {cell_type!r}")
    return nbf.new_code_cell(source) if cell_type == "code" else nbf.new_markdown_cell(source)


def insert_cell(nb: "NotebookNode", cell: "NotebookNode", *, index: int | None = None, after: str | None = None) -> int:
    """Insert at ``index`` (clamped; negative counts from the end) or right after cell ``after``."""
    if after:
        position = find_cell(nb, after) + 1
    elif index is None:
        position = len(nb.cells)
    else:
        position = index if index >= 0 else len(nb.cells) + 1 + index
        position = min(max(position, 0), len(nb.cells))
    taken = {c.get("id") for c in nb.cells}
    while cell.get("id") in taken:  # astronomically rare, but ids must be unique
        import nbformat.v4 as nbf

        cell["id"] = nbf.new_code_cell().id
    nb.cells.insert(position, cell)
    return position


def replace_cell(nb: "NotebookNode", cell_id: str, source: str, cell_type: str | None = None) -> tuple[int, str]:
    """New source (and type, if given) for a cell; a changed code cell loses its stale outputs."""
    index = find_cell(nb, cell_id)
    old = nb.cells[index]
    previous = _source(old)
    if cell_type and cell_type != old.cell_type:
        fresh = make_cell(cell_type, source)
        fresh["id"] = cell_id
        nb.cells[index] = fresh
    else:
        old["source"] = source
        if old.cell_type == "code" and previous != source:
            old["outputs"] = []
            old["execution_count"] = None
    return index, previous


def delete_cell(nb: "NotebookNode", cell_id: str) -> tuple[int, "NotebookNode"]:
    index = find_cell(nb, cell_id)
    return index, nb.cells.pop(index)


def validate(nb: "NotebookNode") -> None:
    import nbformat

    try:
        nbformat.validate(nb)
    except nbformat.ValidationError as exc:
        raise NotebookError(f"the notebook would not be valid nbformat: {str(exc).splitlines()[0]}") from exc


def validate_cells(nb: "NotebookNode", cells: list[Any]) -> None:
    """Validate only what an edit wrote (the cells, the top-level shape): a whole-notebook check
    costs ~50 ms per 500 cells, and the untouched cells are as valid as they were."""
    import nbformat.v4 as nbf

    probe = nbf.new_notebook()
    probe.metadata = nb.get("metadata", {})
    probe.nbformat_minor = nb.get("nbformat_minor", 5)
    probe.cells = list(cells)
    validate(probe)


# -- rendering for the model ---------------------------------------------------------------------
def image_size(mime: str, data: Any) -> tuple[int, int] | None:
    """Width and height from a base64 PNG/GIF/JPEG header, without decoding the whole image."""
    if not isinstance(data, str):
        return None
    try:
        head = base64.b64decode(data[:65536] + "=" * (-len(data[:65536]) % 4), validate=False)
    except (ValueError, TypeError):
        return None
    if mime == "image/png" and head[:8] == b"\x89PNG\r\n\x1a\n" and len(head) >= 24:
        return struct.unpack(">II", head[16:24])
    if mime == "image/gif" and head[:4] == b"GIF8" and len(head) >= 10:
        return struct.unpack("<HH", head[6:10])
    if mime == "image/jpeg" and head[:2] == b"\xff\xd8":
        i = 2
        while i + 9 < len(head):
            if head[i] != 0xFF:
                i += 1
                continue
            marker = head[i + 1]
            if marker in (0xC0, 0xC1, 0xC2, 0xC3):
                h, w = struct.unpack(">HH", head[i + 5:i + 9])
                return w, h
            (length,) = struct.unpack(">H", head[i + 2:i + 4])
            i += 2 + length
    return None


def _mime_text(data: dict[str, Any], metadata: dict[str, Any]) -> str:
    parts: list[str] = []
    for mime in sorted(k for k in data if k.startswith("image/")):
        meta = metadata.get(mime) if isinstance(metadata.get(mime), dict) else {}
        size = image_size(mime, data[mime])
        if meta.get("width") and meta.get("height"):
            size = (int(meta["width"]), int(meta["height"]))
        parts.append(f"[{mime} {size[0]}×{size[1]}]" if size else f"[{mime}]")
    if "text/plain" in data:
        plain = data["text/plain"]
        parts.append("".join(plain) if isinstance(plain, list) else str(plain))
    elif not parts:
        others = ", ".join(sorted(data)) or "empty"
        parts.append(f"[{others}]")
    return "\n".join(parts)


def output_text(output: Any, limits: RenderLimits) -> str:
    kind = output.get("output_type")
    if kind == "stream":
        text = output.get("text", "")
        return "".join(text) if isinstance(text, list) else str(text)
    if kind in ("execute_result", "display_data"):
        return _mime_text(dict(output.get("data") or {}), dict(output.get("metadata") or {}))
    if kind == "error":
        frames = [_ANSI.sub("", str(line)) for line in output.get("traceback") or []]
        tail = frames[-limits.traceback_frames:] if limits.traceback_frames > 0 else []
        head = f"{output.get('ename', 'Error')}: {output.get('evalue', '')}"
        if not tail:
            return head
        body = "\n".join(tail)
        ename = str(output.get("ename") or "")
        return body if ename and tail[-1].strip().startswith(ename) else f"{body}\n{head}"
    return f"[{kind}]"


def _cut(text: str, limit: int) -> str:
    if limit <= 0 or len(text) <= limit:
        return text
    return text[:limit] + f"\n… [{len(text) - limit} more characters cut]"


def cell_record(index: int, cell: Any, limits: RenderLimits, include_outputs: bool = True) -> dict[str, Any]:
    """One cell as data: id, type, source, execution count, outputs as text (each part cut)."""
    record: dict[str, Any] = {
        "id": cell.get("id"), "index": index, "cell_type": cell.get("cell_type"),
        "source": _cut(_source(cell), limits.cell_chars),
    }
    if cell.get("cell_type") == "code":
        record["execution_count"] = cell.get("execution_count")
        if include_outputs:
            texts = [output_text(o, limits) for o in cell.get("outputs") or []]
            record["outputs"] = [_cut(t, limits.cell_chars) for t in texts]
    return record


def render_records(path: str, records: list[dict[str, Any]], total: int) -> str:
    """The model's view: a header, then each cell with its id, type, source and outputs."""
    lines = [f"{path}: {total} cells" + ("" if len(records) == total else f" (showing {len(records)})")]
    for r in records:
        count = r.get("execution_count")
        exec_mark = f" · [{count}]" if count else ""
        lines.append(f"\n--- cell {r['index']} · id {r['id']} · {r['cell_type']}{exec_mark}")
        lines.append(r["source"] if r["source"] else "(empty)")
        outputs = r.get("outputs")
        if outputs:
            lines.append(">>> outputs")
            lines.extend(outputs)
    return "\n".join(lines)
