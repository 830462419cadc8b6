/**
 * "Show on sky": the `%astro sky` cell the sidebar inserts below the active cell and runs (the
 * user's own click, like Run under a code block; no agent permission is involved), for
 *
 * - a target the agent resolved (a `query_target` result): `%astro sky "NAME"`;
 * - a positional catalog result (a successful `query_catalog` or `cone_search` with rows and RA/Dec
 *   columns): `%astro sky --result ID`, which reads the stored result back in the kernel and
 *   overlays its rows.
 *
 * Tool results come from runs the model steers, so only values that pass a strict pattern become
 * code. A name must be a plain object name: one line of letters, digits, spaces and
 * `+-_.*()[]:/`, starting with a letter, digit, `[` or `(` (no quotes, `#`, `$`, braces or line
 * breaks, which the magic line or IPython could act on). A result id must be exactly what the
 * catalog tools make (`cat_` and 16 hex digits). Anything else gets no button.
 */
import type { IToolItem } from './timelineItems';

const SAFE_NAME = /^[A-Za-z0-9[(][A-Za-z0-9 +\-_.*()[\]:/]{0,99}$/;
/** A stored catalog result's id (astro_jupyter/services/tap.py RESULT_ID). */
export const SAFE_RESULT_ID = /^cat_[0-9a-f]{16}$/;
const CATALOG_TOOLS = new Set(['query_catalog', 'cone_search']);

/** The object name a resolved `query_target` call offers to show, or null. */
export function skyTargetName(tool: IToolItem): string | null {
  const result = tool.result;
  if (tool.name !== 'query_target' || !result || result.isError) {
    return null;
  }
  const meta = result.metadata ?? {};
  if (typeof meta.ra_deg !== 'number' || typeof meta.dec_deg !== 'number') {
    return null; // not resolved to a position
  }
  const asked = (tool.arguments as { name?: unknown } | null)?.name;
  const name = typeof asked === 'string' ? asked.trim().replace(/ +/g, ' ') : '';
  return SAFE_NAME.test(name) ? name : null;
}

/** The stored result a successful, positional `query_catalog` / `cone_search` call offers to show, or null:
 * its `catalog` block names the RA and Dec columns (`position`, found by the tool from UCDs or names)
 * and holds at least one row. */
export function skyResultId(tool: IToolItem): string | null {
  const result = tool.result;
  if (!CATALOG_TOOLS.has(tool.name) || !result || result.isError) {
    return null;
  }
  const catalog = result.metadata?.catalog as Record<string, unknown> | undefined;
  if (!catalog || typeof catalog !== 'object') {
    return null;
  }
  const position = catalog.position as { ra?: unknown; dec?: unknown } | null | undefined;
  if (!position || typeof position !== 'object' || typeof position.ra !== 'string' || !position.ra || typeof position.dec !== 'string' || !position.dec) {
    return null; // no positions: nothing to put on the sky
  }
  if (typeof catalog.row_count !== 'number' || catalog.row_count < 1) {
    return null;
  }
  const id = catalog.result_id;
  return typeof id === 'string' && SAFE_RESULT_ID.test(id) ? id : null;
}

/** The cell "Show on sky" runs (loading the magics first: a no-op when loaded), or null when the call offers none. */
export function skyCell(tool: IToolItem): string | null {
  const name = skyTargetName(tool);
  if (name !== null) {
    return `%load_ext astro_jupyter\n%astro sky "${name}"`;
  }
  const id = skyResultId(tool);
  return id === null ? null : `%load_ext astro_jupyter\n%astro sky --result ${id}`;
}
