/**
 * "Show on sky" for a target the agent resolved (a `query_target` result): the `%astro sky` cell
 * the sidebar inserts below the active cell and runs (the user's own click, like Run under a
 * code block; no agent permission is involved).
 *
 * The name is text from the model, so it only becomes code when it is a plain object name: one
 * line of letters, digits, spaces and `+-_.*()[]:/`, starting with a letter, digit, `[` or `(`
 * (no quotes, `#`, `$`, braces or line breaks, which the magic line or IPython could act on).
 * Anything else gets no button.
 */
import type { IToolItem } from './timelineItems';

const SAFE_NAME = /^[A-Za-z0-9[(][A-Za-z0-9 +\-_.*()[\]:/]{0,99}$/;

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

/** The cell "Show on sky" runs (loading the magics first: a no-op when loaded), or null when the call offers none. */
export function skyCell(tool: IToolItem): string | null {
  const name = skyTargetName(tool);
  return name === null ? null : `%load_ext astro_jupyter\n%astro sky "${name}"`;
}
