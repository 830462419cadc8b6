"""Rich results for notebooks, plain text for terminals.

Each object keeps the structured data (``.data``, ``.rows``) for code and renders itself
twice: ``_repr_html_`` (a table for search hits, targets, tool lists) for notebook
frontends, ``__repr__`` (aligned text) for terminal IPython. Kept free of ipywidgets so
``%load_ext`` stays light.
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass, field
from typing import Any, Iterable

MAX_ROWS = 50
MAX_COLS = 8
MAX_CELL = 160
_ROW_KEYS = ("results", "matches", "papers", "hits", "items", "notes", "chunks", "passages", "sessions")


def _cell(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        text = ", ".join(_cell(v) for v in value[:5]) + (" …" if len(value) > 5 else "")
    elif isinstance(value, dict):
        text = json.dumps(value, ensure_ascii=False, default=str)
    else:
        text = "" if value is None else str(value)
    text = " ".join(text.split())
    return text if len(text) <= MAX_CELL else text[: MAX_CELL - 1] + "…"


def _columns(rows: list[dict[str, Any]]) -> list[str]:
    cols: list[str] = []
    for row in rows:
        for key, value in row.items():
            if key not in cols and not isinstance(value, dict):
                cols.append(key)
    return cols[:MAX_COLS]


def html_table(rows: list[dict[str, Any]], columns: list[str] | None = None) -> str:
    cols = columns or _columns(rows)
    head = "".join(f"<th style='text-align:left'>{html.escape(c)}</th>" for c in cols)
    body = "".join(
        "<tr>" + "".join(f"<td style='text-align:left'>{html.escape(_cell(r.get(c)))}</td>" for c in cols) + "</tr>"
        for r in rows[:MAX_ROWS]
    )
    more = f"<p>… {len(rows) - MAX_ROWS} more rows</p>" if len(rows) > MAX_ROWS else ""
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{more}"


def text_table(rows: list[dict[str, Any]], columns: list[str] | None = None, width: int = 48) -> str:
    cols = columns or _columns(rows)
    cells = [[_cell(r.get(c))[:width] for c in cols] for r in rows[:MAX_ROWS]]
    widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(cols)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(cols, widths)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip() for row in cells]
    if len(rows) > MAX_ROWS:
        lines.append(f"… {len(rows) - MAX_ROWS} more rows")
    return "\n".join(lines)


def rows_of(metadata: dict[str, Any]) -> list[dict[str, Any]] | None:
    """The list of records a result is about (search hits, grep matches...), if it has one."""
    for key in _ROW_KEYS:
        value = metadata.get(key)
        if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            return value
    return None


# Tools whose text is what the user asked for (a section, passages and an answer, a file): shown
# first, with the structured metadata folded away below it.
TEXT_FIRST_TOOLS = frozenset({"get_paper_content", "rag_search", "read_file"})


def _need(module: str, what: str) -> Any:
    """Import astropy/pandas only when a result is converted, with the install line if missing."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        package = module.split(".")[0]
        raise ImportError(f"{what} needs {package}, which is not installed: pip install {package}") from exc


def _plain(value: Any) -> Any:
    """A table cell astropy can hold: lists joined, mappings as JSON, everything else as is."""
    if isinstance(value, (list, tuple)):
        return "; ".join(str(v) for v in value)
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False, default=str)
    return value


def rows_to_table(rows: list[dict[str, Any]], columns: list[str] | None = None) -> Any:
    """An astropy ``Table`` of the rows: numeric columns stay numeric (missing values masked),
    other columns are text."""
    table_mod = _need("astropy.table", "to_table()")
    cols = columns or list(dict.fromkeys(k for r in rows for k in r))
    table = table_mod.Table()
    for col in cols:
        values = [_plain(r.get(col)) for r in rows]
        present = [v for v in values if v is not None]
        if present and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in present):
            fill = 0 if all(isinstance(v, int) for v in present) else 0.0
            table[col] = table_mod.MaskedColumn([fill if v is None else v for v in values],
                                                mask=[v is None for v in values])
        elif present and all(isinstance(v, bool) for v in present):
            table[col] = table_mod.MaskedColumn([bool(v) for v in values], mask=[v is None for v in values])
        else:
            table[col] = ["" if v is None else str(v) for v in values]
    return table


def rows_to_pandas(rows: list[dict[str, Any]], columns: list[str] | None = None) -> Any:
    """A pandas ``DataFrame`` of the rows (lists such as authors kept as lists)."""
    pd = _need("pandas", "to_pandas()")
    frame = pd.DataFrame(rows)
    return frame[[c for c in columns if c in frame.columns]] if columns else frame


@dataclass
class TableResult:
    """A list of records (tools, sessions, history hits) shown as a table."""

    title: str
    rows: list[dict[str, Any]]
    columns: list[str] | None = None
    empty: str = "(nothing)"

    def _repr_html_(self) -> str:
        if not self.rows:
            return f"<p><b>{html.escape(self.title)}</b>: {html.escape(self.empty)}</p>"
        return f"<p><b>{html.escape(self.title)}</b></p>" + html_table(self.rows, self.columns)

    def __repr__(self) -> str:
        if not self.rows:
            return f"{self.title}: {self.empty}"
        return f"{self.title}\n" + text_table(self.rows, self.columns)

    def __len__(self) -> int:
        return len(self.rows)

    def __iter__(self) -> Any:
        return iter(self.rows)

    def to_table(self) -> Any:
        """The rows as an astropy ``Table`` (all fields, not just the shown columns)."""
        return rows_to_table(self.rows)

    def to_pandas(self) -> Any:
        """The rows as a pandas ``DataFrame``."""
        return rows_to_pandas(self.rows)


@dataclass
class AstroResult:
    """What ``r = %astro TOOL ...`` gives back: the tool's text and its structured result."""

    tool: str
    arguments: dict[str, Any] | None
    content: str
    is_error: bool = False
    metadata: dict[str, Any] = field(default_factory=dict)
    duration_ms: int = 0

    @property
    def data(self) -> dict[str, Any]:
        """The structured result (the tool's metadata: hits, coordinates, paths...)."""
        return self.metadata

    @property
    def rows(self) -> list[dict[str, Any]] | None:
        return rows_of(self.metadata)

    @property
    def skycoord(self) -> Any:
        """The position as an astropy ``SkyCoord`` (ICRS), for results that have one (query_target)."""
        ra, dec = self.metadata.get("ra_deg"), self.metadata.get("dec_deg")
        if self.is_error or ra is None or dec is None:
            raise AttributeError(f"this {self.tool} result has no position (query_target results have one)")
        coords = _need("astropy.coordinates", ".skycoord")
        units = _need("astropy.units", ".skycoord")
        return coords.SkyCoord(ra=float(ra) * units.deg, dec=float(dec) * units.deg, frame="icrs")

    def to_table(self) -> Any:
        """The result's records (search hits, library papers, passages) as an astropy ``Table``."""
        return rows_to_table(self._records("to_table()"))

    def to_pandas(self) -> Any:
        """The result's records as a pandas ``DataFrame``."""
        return rows_to_pandas(self._records("to_pandas()"))

    def _records(self, what: str) -> list[dict[str, Any]]:
        rows = self.rows
        if rows is not None:
            return rows
        if self.metadata and not self.is_error and self.tool == "query_target":
            return [{k: v for k, v in self.metadata.items() if not isinstance(v, dict)}]
        raise ValueError(f"{what}: this {self.tool} result holds no list of records")

    def __str__(self) -> str:
        return self.content

    def __repr__(self) -> str:
        status = "error" if self.is_error else "ok"
        return f"[{self.tool} · {status} · {self.duration_ms} ms]\n{self.content}"

    def _repr_html_(self) -> str:
        colour = "#b00020" if self.is_error else "#2e7d32"
        status = "error" if self.is_error else "ok"
        head = (f"<p><code>{html.escape(self.tool)}</code> <span style='color:{colour}'>{status}</span>"
                f" <small>{self.duration_ms} ms</small></p>")
        rows = None if self.is_error else self.rows
        if self.tool in TEXT_FIRST_TOOLS and not self.is_error:
            folded = html_table(rows) if rows else html_table(
                [{"field": k, "value": v} for k, v in self.metadata.items() if not isinstance(v, dict)], ["field", "value"])
            return (head + f"<pre style='white-space:pre-wrap'>{html.escape(self.content)}</pre>"
                    + f"<details><summary>metadata</summary>{folded}</details>")
        if rows:
            body = html_table(rows)
        elif not self.is_error and self.metadata:  # one record (a target, a paper): field / value
            fields = [{"field": k, "value": v} for k, v in self.metadata.items() if not isinstance(v, dict)]
            body = html_table(fields, ["field", "value"])
        else:
            return head + f"<pre>{html.escape(self.content)}</pre>"
        return head + body + f"<details><summary>text</summary><pre>{html.escape(self.content)}</pre></details>"


class CatalogQueryResult(AstroResult):
    """``r = %astro query_catalog ...`` (or ``cone_search``): the stored VOTable behind the preview.

    ``to_table()`` reads the whole result from the library's VOTable (units, UCDs and descriptions
    kept); ``to_pandas()`` is that table as a DataFrame; ``show_sky()`` overlays the rows on a sky view.
    """

    @classmethod
    def from_stored(cls, record: dict[str, Any]) -> "CatalogQueryResult":
        """A result stored earlier (a ``catalog_results`` record as a dict), read back by its id:
        ``%astro sky --result ID``. Its provenance, not the tool call's preview."""
        catalog = {k: record.get(k) for k in ("service", "service_url", "adql", "row_count", "truncated", "maxrec",
                                               "mode", "created_at")}
        catalog["result_id"] = record.get("id")
        content = (f"stored result {record.get('id')}: {record.get('row_count')} rows from {record.get('service')}\n"
                   f"{record.get('adql')}")
        metadata = {"catalog": catalog, "result_id": record.get("id"), "path": record.get("path")}
        return cls("query_catalog", {"service": record.get("service"), "adql": record.get("adql")}, content, False,
                   metadata, int(record.get("duration_ms") or 0))

    @property
    def catalog(self) -> dict[str, Any]:
        return dict(self.metadata.get("catalog") or {})

    @property
    def path(self) -> str:
        path = self.metadata.get("path")
        if self.is_error or not path:
            raise ValueError(f"this {self.tool} call failed; there is no stored result")
        return str(path)

    def to_table(self) -> Any:
        """Every row as an astropy ``Table`` (read from the stored VOTable)."""
        table_mod = _need("astropy.table", "to_table()")
        return table_mod.Table.read(self.path, format="votable")

    def to_pandas(self) -> Any:
        _need("pandas", "to_pandas()")
        return self.to_table().to_pandas()

    def show_sky(self, target: Any = None) -> Any:
        """The rows on an Aladin Lite view (``astro_jupyter.kernel.sky.show_sky``), centred on ``target``."""
        import importlib

        sky = importlib.import_module("astro_jupyter.kernel.sky")
        return sky.show_sky(self.to_table(), target=target)

    def __repr__(self) -> str:
        if self.is_error:
            return super().__repr__()
        cat = self.catalog
        return (f"[{self.tool} · {cat.get('row_count')} rows{' (truncated)' if cat.get('truncated') else ''} · "
                f"{cat.get('result_id')} · {self.duration_ms} ms]\n{self.content}")

    def _repr_html_(self) -> str:
        if self.is_error:
            return super()._repr_html_()
        cat = self.catalog
        cols = [c.get("name", "") for c in cat.get("columns") or []]
        rows = list(cat.get("preview") or [])
        units = {c.get("name"): c.get("unit") for c in cat.get("columns") or []}
        head = (f"<p><code>{html.escape(self.tool)}</code> {cat.get('row_count')} rows from "
                f"<b>{html.escape(str(cat.get('service')))}</b>"
                + (" <span style='color:#b00020'>(truncated at maxrec)</span>" if cat.get("truncated") else "")
                + f" <small>{html.escape(str(cat.get('result_id')))} · {self.duration_ms} ms</small></p>")
        labels = {c: f"{c} [{units[c]}]" if units.get(c) else c for c in cols}
        shown = [{labels[c]: r.get(c) for c in cols} for r in rows]
        return (head + "<div style='max-height:24em;overflow:auto'>" + html_table(shown, [labels[c] for c in cols][:MAX_COLS * 2])
                + "</div>" + f"<details><summary>ADQL</summary><pre>{html.escape(str(cat.get('adql')))}</pre></details>")


@dataclass
class AgentAnswer:
    """The final answer of a ``%%astro`` run (or a subagent), with where it lives."""

    text: str
    session_id: str = ""
    run_id: str = ""
    reason: str = "finished"
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    # The cell's timeline already showed the text: Out[n] is then a one-line handle, not the answer again.
    shown: bool = False

    def __str__(self) -> str:
        return self.text

    def handle(self) -> str:
        calls = len(self.tool_calls)
        return (f"<AgentAnswer {self.reason} · session {self.session_id} · {calls} tool call{'' if calls == 1 else 's'}"
                f" · {len(self.text)} chars; .text has the answer>")

    def __repr__(self) -> str:
        if self.shown:
            return self.handle()
        return f"{self.text}\n[{self.reason} · session {self.session_id} · {len(self.tool_calls)} tool call(s)]"

    def _repr_markdown_(self) -> str | None:
        if self.shown:
            return None  # the plain one-line handle only
        footer = f"\n\n<small>{self.reason} · session <code>{self.session_id}</code></small>"
        return (self.text or "*(no answer)*") + footer


def tools_table(registry: Any) -> TableResult:
    rows = [
        {"name": t.name, "read-only": "yes" if t.is_readonly else "", "deferred": "yes" if t.defer_loading else "",
         "summary": t.classifier_summary()}
        for t in registry.sorted_tools()
    ]
    return TableResult(f"{len(rows)} tools", rows, ["name", "read-only", "deferred", "summary"])


def records_table(title: str, records: Iterable[dict[str, Any]], columns: list[str], empty: str) -> TableResult:
    return TableResult(title, [dict(r) for r in records], columns, empty)
