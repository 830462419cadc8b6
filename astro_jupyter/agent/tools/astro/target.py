"""``query_target``: resolve an object name through CDS Sesame (position, type, identifiers).

Thin on purpose: the work is in ``services/sesame.py``; the tool only formats the record
for the model (text) and for people and code (metadata).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ....errors import NotFoundError, ServiceError
from ..base import AgentTool, ToolContext, ToolOutput

if TYPE_CHECKING:
    from ....config import AstroConfig

_MAX_ALIASES = 12


class QueryTargetTool(AgentTool):
    name = "query_target"
    description = (
        "Resolve an astronomical object name (e.g. 'M 31', 'Sgr A*', 'NGC 4486') through CDS Sesame "
        "(Simbad, NED, VizieR): J2000 RA/Dec in degrees and sexagesimal, object type, main identifier "
        "and aliases."
    )
    parameters = {
        "type": "object",
        "properties": {"name": {"type": "string", "description": "Object name or identifier, as an astronomer writes it."}},
        "required": ["name"],
        "additionalProperties": False,
    }
    is_readonly = True

    def classifier_summary(self) -> str:
        return "Resolve an object name to coordinates, type and aliases (CDS Sesame)."

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        name = str(args.get("name") or "").strip()
        if not name:
            return ToolOutput.error("query_target needs a non-empty 'name' (e.g. 'M 31').")
        try:
            rec = await ctx.services.sesame.resolve(name)
        except NotFoundError:
            return ToolOutput.error(
                f"Target {name!r} was not found by CDS Sesame (Simbad, NED, VizieR). Check the spelling or try "
                "another designation (e.g. a catalogue number).",
                name=name,
                not_found=True,
            )
        except ServiceError as exc:
            shown = name if len(name) <= 80 else name[:80] + "…"
            return ToolOutput.error(f"Could not resolve {shown!r}: {exc}", name=shown, reason=exc.reason)
        aliases = rec.aliases[:_MAX_ALIASES]
        more = len(rec.aliases) - len(aliases)
        lines = [
            f"{rec.main_id} (asked: {name})",
            f"RA  = {rec.ra_deg:.6f} deg = {rec.ra_sexa}",
            f"Dec = {rec.dec_deg:+.6f} deg = {rec.dec_sexa}   (J2000)",
            f"Type: {rec.otype or 'unknown'}" + (f"; morphology {rec.morph_type}" if rec.morph_type else ""),
            f"Source: {rec.source_db}",
        ]
        if "radial_velocity_km_s" in rec.extra:
            lines.append(f"Radial velocity: {rec.extra['radial_velocity_km_s']:g} km/s")
        if aliases:
            lines.append("Aliases: " + "; ".join(aliases) + (f" (+{more} more)" if more > 0 else ""))
        return ToolOutput("\n".join(lines), metadata=rec.to_dict())


def tools(config: "AstroConfig") -> list[AgentTool]:
    return [QueryTargetTool()]
