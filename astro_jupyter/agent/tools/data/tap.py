"""Catalog tools over TAP: ``query_catalog``, ``describe_catalog``, ``cone_search``.

Thin on purpose: the queries, the guard and the storage are ``services/tap.py``; the tools
check arguments, ask where the pipeline must (a service the user has not named, a maxrec above
``MAXREC_ASK_ABOVE``) and format a bounded preview for the model plus a ``catalog`` block of
metadata for the sidebar's table, the kernel's result object and the exported log.

Flags: none is read-only in the pipeline's sense (query results are stored in the library, and a
read-only tool's question would be skipped in auto mode, which must not happen for an unknown
URL), but all are concurrency-safe (each writes its own new file). Cancel, not Block: stopping
mid-query deletes the async job and the partial file, and nothing is recorded.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from ....errors import AstroError, InvalidInput, NotFoundError, ServiceError
from ....services.tap import (
    ASYNC_DEADLINE_SECS,
    DEFAULT_MAXREC,
    MAXREC_ASK_ABOVE,
    MAXREC_LIMIT,
    CatalogResult,
    QueryCancelled,
    TapError,
    TapServiceRef,
    UnknownService,
    check_table_name,
    position_columns,
    resolve_service,
)
from ..base import AgentTool, InterruptBehavior, PermissionRule, ProgressReporter, ToolContext, ToolOutput
from ..filesystem.protected import tool_results_dir_for

if TYPE_CHECKING:
    from ....config import AstroConfig

TEXT_ROWS = 20
TEXT_COLUMNS = 12
CELL_CHARS = 24
TEXT_LIMIT = 6000
MAX_RADIUS_DEG = 10.0
ADQL_HINT = "Check table and column names with describe_catalog(service=..., table=...) and quote reserved words."

_SERVICE_PROP = {
    "type": "string",
    "description": "A service name (simbad, vizier, gaia, mast, ned, irsa, heasarc, eso, cadc, gavo, noirlab, or one "
                   "the user configured) or a TAP base URL (asks the user first).",
}


def _cell(value: Any) -> str:
    text = "" if value is None else (f"{value:.6g}" if isinstance(value, float) else str(value))
    text = " ".join(text.split())
    return text if len(text) <= CELL_CHARS else text[: CELL_CHARS - 1] + "…"


def preview_text(result: CatalogResult, *, what: str) -> str:
    """The bounded text the model reads: counts, provenance, columns with units, the first rows."""
    r = result.record
    lines = [f"{what}: {r.row_count:,} row{'s' if r.row_count != 1 else ''} from {r.service} "
             f"({r.mode}, {r.duration_ms} ms); result {r.id} stored as a VOTable."]
    if r.truncated:
        lines.append(f"TRUNCATED at maxrec={r.maxrec:,}: raise maxrec or narrow the query (TOP, WHERE) for all rows.")
    cols = [f"{c['name']}" + (f" [{c['unit']}]" if c.get("unit") else "") + (f" ({c['ucd']})" if c.get("ucd") else "")
            for c in result.columns]
    lines.append("Columns: " + "; ".join(cols[:60]) + (f"; … +{len(cols) - 60} more" if len(cols) > 60 else ""))
    if result.position:
        lines.append(f"Position columns: {result.position['ra']}, {result.position['dec']}")
    shown = [c["name"] for c in result.columns[:TEXT_COLUMNS]]
    rows = result.preview[:TEXT_ROWS]
    if rows:
        table = [[_cell(row.get(n)) for n in shown] for row in rows]
        widths = [max([len(n)] + [len(t[i]) for t in table]) for i, n in enumerate(shown)]
        lines.append(f"First {len(rows)} rows" + (f" (first {TEXT_COLUMNS} columns)" if len(result.columns) > TEXT_COLUMNS else "") + ":")
        lines.append("  ".join(n.ljust(w) for n, w in zip(shown, widths)).rstrip())
        lines += ["  ".join(v.ljust(w) for v, w in zip(t, widths)).rstrip() for t in table]
    text = "\n".join(lines)
    if len(text) > TEXT_LIMIT:
        text = text[: TEXT_LIMIT - 1] + "…"
    return text + f"\nAll rows: the VOTable of {r.id} (r.to_table() after %astro, or download from the sidebar)."


def job_deadline(tool_timeout: float) -> float:
    """An async job's deadline: inside the executor's tool timeout, so the job is deleted by us
    (with a clear message) rather than the call being cut off."""
    return max(5.0, min(ASYNC_DEADLINE_SECS, tool_timeout - 15.0))


def _maxrec(args: dict[str, Any]) -> int:
    raw = args.get("maxrec", DEFAULT_MAXREC)
    if raw is None:
        return DEFAULT_MAXREC
    if isinstance(raw, bool) or not isinstance(raw, (int, float)) or int(raw) != raw:
        raise InvalidInput(f"'maxrec' must be a whole number, not {raw!r}")
    value = int(raw)
    if not 1 <= value <= MAXREC_LIMIT:
        raise InvalidInput(f"'maxrec' must be between 1 and {MAXREC_LIMIT:,} (default {DEFAULT_MAXREC:,})")
    return value


class _CatalogTool(AgentTool):
    """What the TAP tools share: resolving the service, the asks, running and reporting a query."""

    interrupt_behavior = InterruptBehavior.CANCEL
    defer_loading = True  # found through load_tool: the resident schemas stay small for local models

    def __init__(self, config: "AstroConfig") -> None:
        self.config = config

    def is_concurrency_safe(self, args: dict[str, Any]) -> bool:
        return True

    def _ref(self, args: dict[str, Any]) -> TapServiceRef:
        return resolve_service(self.config, str(args.get("service") or self.default_service(args)))

    def default_service(self, args: dict[str, Any]) -> str:
        return ""

    def check_permissions(self, args: dict[str, Any]) -> list[PermissionRule]:
        rules: list[PermissionRule] = []
        try:
            ref = self._ref(args)
        except UnknownService:
            return []  # execute answers with the list of known services
        if not ref.trusted:
            rules.append(PermissionRule("ask", self.name, f"{self.name} wants to query a TAP service you have not "
                                        f"configured: {ref.url}"))
        raw = args.get("maxrec")
        if isinstance(raw, (int, float)) and not isinstance(raw, bool) and raw > MAXREC_ASK_ABOVE:
            rules.append(PermissionRule("ask", self.name, f"{self.name} asks for up to {int(raw):,} rows "
                                        f"(more than {MAXREC_ASK_ABOVE:,})"))
        return rules

    def permission_scope(self, args: dict[str, Any]) -> str:
        try:
            ref = self._ref(args)
        except UnknownService:
            return ""
        return "" if ref.trusted else ref.url  # "always" for one unknown service, not every URL

    async def _run(self, ctx: ToolContext, progress: ProgressReporter, service: str, adql: str, maxrec: int,
                   *, what: str, extra: dict[str, Any] | None = None) -> ToolOutput:
        async def report(message: str) -> None:
            await progress(message=message)

        try:
            result = await ctx.services.tap.query(
                service, adql, maxrec=maxrec, dest_dir=tool_results_dir_for(ctx.config, ctx.owner) / "catalogs",
                owner=ctx.owner, session_id=ctx.session_id or None, progress=report, cancelled=ctx.cancelled,
                deadline_secs=job_deadline(ctx.config.tool_timeout_secs),
            )
        except QueryCancelled as exc:
            return ToolOutput.error(f"{what} was cancelled; nothing was stored ({exc}).", service=service, cancelled=True)
        except TapError as exc:
            return _error(what, service, adql, exc)
        except (ServiceError, InvalidInput) as exc:
            return ToolOutput.error(f"{what} on {service} failed: {exc}", service=service, adql=adql, reason=exc.reason)
        except AstroError as exc:
            return ToolOutput.error(f"{what} failed: {exc}", service=service, adql=adql, reason=exc.reason)
        meta = {"catalog": result.metadata(), "result_id": result.id, "path": result.record.path, **(extra or {})}
        return ToolOutput(preview_text(result, what=what), metadata=meta)


def _error(what: str, service: str, adql: str, exc: TapError) -> ToolOutput:
    from ....services.tap import TapQueryError

    hint = f"\nHint: {ADQL_HINT}" if isinstance(exc, TapQueryError) else ""
    return ToolOutput.error(
        f"{what} on {service} failed: {exc}{hint}", service=service, adql=adql, reason=exc.reason,
        service_message=exc.service_message,
    )


class QueryCatalogTool(_CatalogTool):
    name = "query_catalog"
    description = (
        "Run an ADQL query on a TAP service (SIMBAD, VizieR, Gaia, MAST, NED, IRSA, HEASARC, ESO ... by short name, "
        "or a TAP URL). Returns the row count, the columns with units and UCDs, and the first rows; the full result is "
        "stored as a VOTable (handle in the answer). Use describe_catalog first for table and column names. "
        f"maxrec defaults to {DEFAULT_MAXREC:,}; more than {MAXREC_ASK_ABOVE:,} asks the user. Always name computed "
        "columns with AS."
    )
    parameters = {
        "type": "object",
        "properties": {
            "service": _SERVICE_PROP,
            "adql": {"type": "string", "description": "The ADQL query, e.g. SELECT TOP 100 source_id, ra, dec FROM "
                                                      "gaiadr3.gaia_source WHERE phot_g_mean_mag < 10"},
            "maxrec": {"type": "integer", "minimum": 1, "maximum": MAXREC_LIMIT,
                       "description": f"Most rows to return (default {DEFAULT_MAXREC:,})."},
        },
        "required": ["service", "adql"],
        "additionalProperties": False,
    }

    def classifier_summary(self) -> str:
        return "Run ADQL on a TAP catalog service (SIMBAD, VizieR, Gaia, ...); rows stored as a VOTable."

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        async def no_progress(done: int | None = None, total: int | None = None, message: str = "") -> None:
            return None

        return await self.execute_with_progress(args, ctx, no_progress)

    async def execute_with_progress(self, args: dict[str, Any], ctx: ToolContext, progress: ProgressReporter) -> ToolOutput:
        service, adql = str(args.get("service") or "").strip(), str(args.get("adql") or "").strip()
        if not adql:
            return ToolOutput.error("query_catalog needs 'adql', e.g. SELECT TOP 10 * FROM TAP_SCHEMA.tables")
        try:
            maxrec = _maxrec(args)
            ctx.services.tap.resolve(service)
        except InvalidInput as exc:
            return ToolOutput.error(f"query_catalog: {exc}", service=service, reason=exc.reason)
        return await self._run(ctx, progress, service, adql, maxrec, what="query_catalog")


class DescribeCatalogTool(_CatalogTool):
    name = "describe_catalog"
    description = (
        "List the tables of a TAP service, or one table's columns with datatypes, units, UCDs and descriptions, "
        "from its TAP_SCHEMA, so ADQL uses real names. Call it before query_catalog on an unfamiliar table."
    )
    parameters = {
        "type": "object",
        "properties": {
            "service": _SERVICE_PROP,
            "table": {"type": "string", "description": "A table name (schema-qualified or not); omit to list tables."},
        },
        "required": ["service"],
        "additionalProperties": False,
    }

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        service = str(args.get("service") or "").strip()
        table = args.get("table")
        tap = ctx.services.tap
        try:
            tap.resolve(service)
            if table in (None, ""):
                found = await tap.tables(service)
                rows = [{"table": str(r["table_name"]), "description": _one_line(r["description"], 160)} for r in found]
                text = [f"{service}: {len(rows)} table{'s' if len(rows) != 1 else ''}" + (" (first 300)" if len(rows) >= 300 else "") + ":"]
                text += [f"- {r['table']}" + (f": {r['description']}" if r["description"] else "") for r in rows]
                return ToolOutput(_bounded("\n".join(text)), metadata={"service": service, "tables": rows})
            name, found = await tap.columns(service, str(table))
        except TapError as exc:
            return _error("describe_catalog", service, "", exc)
        except (NotFoundError, InvalidInput, ServiceError) as exc:
            return ToolOutput.error(f"describe_catalog: {exc}", service=service, reason=exc.reason)
        except AstroError as exc:
            return ToolOutput.error(f"describe_catalog failed: {exc}", service=service, reason=exc.reason)
        cols = [
            {"name": str(r["column_name"]), "datatype": _str(r["datatype"]), "unit": _str(r["unit"]),
             "ucd": _str(r["ucd"]), "description": _one_line(r["description"], 160)}
            for r in found if str(r["table_name"]) == name
        ]
        text = [f"{name} on {service}: {len(cols)} columns (name, datatype, unit, UCD: description)"]
        text += [f"- {c['name']} {c['datatype']}" + (f" [{c['unit']}]" if c["unit"] else "") + (f" {c['ucd']}" if c["ucd"] else "")
                 + (f": {c['description']}" if c["description"] else "") for c in cols]
        return ToolOutput(_bounded("\n".join(text)), metadata={"service": service, "table": name, "columns": cols})


class ConeSearchTool(_CatalogTool):
    name = "cone_search"
    description = (
        "Rows of a catalog table within a radius of a target (name resolved by Sesame) or of ra/dec in degrees, "
        "nearest first, with their distance; the common catalog question in one call. The table's position columns "
        "are found from its TAP_SCHEMA UCDs. Stored as a VOTable like query_catalog."
    )
    parameters = {
        "type": "object",
        "properties": {
            "target": {"type": "string", "description": "Object name (e.g. 'M 87'); or give ra and dec."},
            "ra": {"type": "number", "description": "Right ascension, degrees (ICRS)."},
            "dec": {"type": "number", "description": "Declination, degrees (ICRS)."},
            "radius": {"type": ["number", "string"],
                       "description": "Radius: a number of arcseconds, or a string with a unit ('2 arcmin', '0.1 deg')."},
            "catalog": {"type": "string", "description": "The table, e.g. gaiadr3.gaia_source, I/355/gaiadr3."},
            "service": {**_SERVICE_PROP, "description": _SERVICE_PROP["description"] + " Default: vizier."},
            "maxrec": {"type": "integer", "minimum": 1, "maximum": MAXREC_LIMIT},
        },
        "required": ["radius", "catalog"],
        "additionalProperties": False,
    }

    def default_service(self, args: dict[str, Any]) -> str:
        return "vizier"

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        async def no_progress(done: int | None = None, total: int | None = None, message: str = "") -> None:
            return None

        return await self.execute_with_progress(args, ctx, no_progress)

    async def execute_with_progress(self, args: dict[str, Any], ctx: ToolContext, progress: ProgressReporter) -> ToolOutput:
        service = str(args.get("service") or "vizier").strip()
        tap = ctx.services.tap
        try:
            maxrec = _maxrec(args)
            tap.resolve(service)
            radius_deg = parse_radius(args.get("radius"))
            table = check_table_name(str(args.get("catalog") or ""))
            ra, dec, centre = await self._centre(args, ctx)
            name, cols = await tap.columns(service, table)
        except TapError as exc:
            return _error("cone_search", service, "", exc)
        except (NotFoundError, InvalidInput, ServiceError) as exc:
            return ToolOutput.error(f"cone_search: {exc}", service=service, reason=exc.reason)
        position = position_columns([
            {"name": str(r["column_name"]), "ucd": _str(r["ucd"])} for r in cols if str(r["table_name"]) == name])
        if position is None:
            return ToolOutput.error(f"cone_search: {name} on {service} has no columns with UCDs pos.eq.ra / pos.eq.dec; "
                                    "write the query with query_catalog instead.", service=service, table=name)
        adql = cone_adql(name, position["ra"], position["dec"], ra, dec, radius_deg)
        return await self._run(ctx, progress, service, adql, maxrec, what="cone_search",
                               extra={"centre": {"ra": ra, "dec": dec, "target": centre}, "radius_deg": radius_deg})

    async def _centre(self, args: dict[str, Any], ctx: ToolContext) -> tuple[float, float, str | None]:
        target = str(args.get("target") or "").strip()
        ra, dec = args.get("ra"), args.get("dec")
        if target and (ra is not None or dec is not None):
            raise InvalidInput("give either 'target' or 'ra' and 'dec', not both")
        if target:
            rec = await ctx.services.sesame.resolve(target)
            return float(rec.ra_deg), float(rec.dec_deg), rec.main_id
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (ra, dec)):
            raise InvalidInput("give 'target' (an object name) or numeric 'ra' and 'dec' in degrees")
        if not (0 <= float(ra) < 360 and -90 <= float(dec) <= 90):  # type: ignore[arg-type]
            raise InvalidInput(f"ra must be in [0, 360) and dec in [-90, 90] degrees, not ({ra}, {dec})")
        return float(ra), float(dec), None  # type: ignore[arg-type]


def parse_radius(value: Any) -> float:
    """A radius in degrees from arcseconds (a number) or a string with a unit; at most ``MAX_RADIUS_DEG``."""
    if isinstance(value, bool) or value is None or value == "":
        raise InvalidInput("'radius' is needed: arcseconds as a number, or e.g. '2 arcmin'")
    if isinstance(value, (int, float)):
        deg = float(value) / 3600.0
    else:
        match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][-+]?\d+)?)\s*(deg|degree|degrees|d|arcmin|amin|'|arcsec|asec|\")?\s*",
                             str(value))
        if not match:
            raise InvalidInput(f"'radius' {value!r} is not a radius: use e.g. 30 (arcsec), '2 arcmin' or '0.1 deg'")
        number, unit = float(match.group(1)), (match.group(2) or "arcsec")
        deg = number if unit in ("deg", "degree", "degrees", "d") else number / 60 if unit in ("arcmin", "amin", "'") else number / 3600
    if not 0 < deg <= MAX_RADIUS_DEG:
        raise InvalidInput(f"'radius' must be above 0 and at most {MAX_RADIUS_DEG:g} degrees")
    return deg


def _ident(name: str) -> str:
    """A column name as ADQL: plain when it is a regular identifier, else a delimited one."""
    return name if re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", name) else '"' + name.replace('"', '""') + '"'


def cone_adql(table: str, ra_col: str, dec_col: str, ra: float, dec: float, radius_deg: float) -> str:
    """The one ADQL template: everything within the circle, nearest first, the distance in degrees."""
    point = f"POINT('ICRS', t.{_ident(ra_col)}, t.{_ident(dec_col)})"
    centre = f"POINT('ICRS', {ra!r}, {dec!r})"
    return (f"SELECT t.*, DISTANCE({point}, {centre}) AS dist_deg FROM {table} AS t "
            f"WHERE 1 = CONTAINS({point}, CIRCLE('ICRS', {ra!r}, {dec!r}, {radius_deg!r})) ORDER BY dist_deg")


def _str(value: Any) -> str:
    import numpy as np

    if value is None or value is np.ma.masked:
        return ""
    return value.decode() if isinstance(value, bytes) else str(value)


def _one_line(value: Any, limit: int) -> str:
    text = " ".join(_str(value).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _bounded(text: str) -> str:
    return text if len(text) <= TEXT_LIMIT * 2 else text[: TEXT_LIMIT * 2 - 40] + "\n… (cut; ask about one table)"


def tools(config: "AstroConfig") -> list[AgentTool]:
    return [QueryCatalogTool(config), DescribeCatalogTool(config), ConeSearchTool(config)]


