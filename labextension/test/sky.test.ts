// @vitest-environment happy-dom
/** "Show on sky": a resolved query_target or a positional catalog result (query_catalog, cone_search)
 * offers the `%astro sky` cell, run through the panel's code action (insert below the active cell and
 * run it); a name that is not a plain object name, or a result id that is not one, never becomes code. */
import { describe, expect, it } from 'vitest';

import { skyCell } from '../src/sky';
import { TimelineModel } from '../src/timeline';
import { IToolItem } from '../src/timelineItems';
import { IRenderContext } from '../src/widgets/items';
import { TimelineView } from '../src/widgets/timelineView';
import { AgentEvent } from '../src/tokens';

const RESOLVED = { main_id: 'NGC  1275', ra_deg: 49.9507, dec_deg: 41.5117, otype: 'Sy2' };

type Result = { output: string; is_error?: boolean; metadata?: Record<string, unknown> };

function render(name: unknown, result: Result) {
  return renderCall('query_target', { name }, result);
}

function renderCall(tool: string, args: Record<string, unknown>, result: Result) {
  const calls: [string, string][] = [];
  const ctx: IRenderContext = {
    rendermime: null,
    answer: () => undefined,
    openPath: () => undefined,
    code: (action, text) => calls.push([action, text]),
    continueRun: () => undefined,
    expandTools: () => false,
    lazy: null
  };
  const model = new TimelineModel();
  const view = new TimelineView(model, ctx);
  document.body.appendChild(view.node);
  const events: AgentEvent[] = [
    { type: 'session', session_id: 's', run_id: 'r1' },
    { type: 'tool_call', id: 'q', name: tool, arguments: args, step: 1 },
    { type: 'tool_result', tool_call_id: 'q', name: tool, output: result.output, is_error: result.is_error ?? false, metadata: result.metadata ?? {}, duration_ms: 12 } as AgentEvent
  ];
  events.forEach((e, i) => model.apply('r1', i + 1, e));
  view.flush();
  return { view, calls, button: view.node.querySelector<HTMLButtonElement>('.jp-Astro-sky') };
}

describe('Show on sky', () => {
  it('runs the %astro sky cell for a resolved target', () => {
    const { button, calls } = render('NGC 1275', { output: 'NGC 1275 ...', metadata: RESOLVED });
    expect(button?.textContent).toBe('Show on sky');
    button!.click();
    expect(calls).toEqual([['run', '%load_ext astro_jupyter\n%astro sky "NGC 1275"']]);
  });

  it('is not offered for an unresolved or failed lookup', () => {
    expect(render('Nowhere 1', { output: 'not found', is_error: true, metadata: { not_found: true } }).button).toBeNull();
    expect(render('M 31', { output: 'odd', metadata: { main_id: 'M 31' } }).button).toBeNull();
  });

  it('never turns a crafted name into code', () => {
    for (const name of ['M 31"\nimport os', 'M31\nos.system("x")', 'M31 # x', '--table secrets', '{os.getcwd()}', '$HOME', "Barnard's star", 'M 31\u2028x', 7]) {
      expect(render(name, { output: 'resolved', metadata: RESOLVED }).button).toBeNull();
    }
    for (const name of ['[HB89] 0316+413', 'Sgr A*', '2MASS J03194823+4130420', 'alf Cen A']) {
      const tool = { name: 'query_target', arguments: { name }, result: { output: '', isError: false, metadata: RESOLVED, durationMs: 1 } } as unknown as IToolItem;
      expect(skyCell(tool)).toBe(`%load_ext astro_jupyter\n%astro sky "${name}"`);
    }
  });

  describe('under a catalog result', () => {
    const ID = 'cat_0123456789abcdef';
    const COLUMNS = [
      { name: 'source_id', unit: null, ucd: 'meta.id;meta.main', datatype: 'long' },
      { name: 'ra', unit: 'deg', ucd: 'pos.eq.ra;meta.main', datatype: 'double' },
      { name: 'dec', unit: 'deg', ucd: 'pos.eq.dec;meta.main', datatype: 'double' }
    ];
    function catalogMeta(over: Record<string, unknown> = {}, id: unknown = ID): Record<string, unknown> {
      const catalog = {
        service: 'local', adql: 'SELECT ...', row_count: 12, truncated: false, maxrec: 10000, mode: 'sync', result_id: id,
        columns: COLUMNS, preview: [{ source_id: 1, ra: 187.7, dec: 12.4 }], position: { ra: 'ra', dec: 'dec' }, ...over
      };
      return { catalog, result_id: id, path: `/home/u/.astro/tool-results/${String(id)}.vot` };
    }
    const CONE = { target: 'M 87', radius: 60, catalog: 'astrojup.stars', service: 'local' };
    const QUERY = { service: 'local', adql: 'SELECT TOP 12 source_id, ra, dec FROM astrojup.stars' };

    it('runs %astro sky --result ID for a positional cone_search or query_catalog result', () => {
      for (const [tool, args] of [['cone_search', CONE], ['query_catalog', QUERY]] as const) {
        const { button, calls } = renderCall(tool, args, { output: 'cone_search: 12 rows ...', metadata: catalogMeta() });
        expect(button?.textContent).toBe('Show on sky');
        expect(button?.title).toBe(`Insert \u201c%astro sky --result ${ID}\u201d below the active cell and run it`);
        button!.click();
        expect(calls).toEqual([['run', `%load_ext astro_jupyter\n%astro sky --result ${ID}`]]);
      }
    });

    it('is not offered for a table without positions, an empty one, or a failed query', () => {
      const cases: Result[] = [
        { output: 'rows', metadata: catalogMeta({ position: null, columns: [COLUMNS[0]] }) },
        { output: 'rows', metadata: catalogMeta({ position: { ra: 'ra' } }) },
        { output: 'rows', metadata: catalogMeta({ position: { ra: 'ra', dec: '' } }) },
        { output: 'rows', metadata: catalogMeta({ row_count: 0, preview: [] }) },
        { output: 'ADQL error: no column nope', is_error: true, metadata: catalogMeta() },
        { output: 'ADQL error', is_error: true, metadata: { service: 'local', reason: 'tap_query_error' } },
        { output: 'no catalog block', metadata: { result_id: ID } }
      ];
      for (const result of cases) {
        expect(renderCall('query_catalog', QUERY, result).button).toBeNull();
      }
      // describe_catalog lists columns, it has no rows to show
      expect(renderCall('describe_catalog', { service: 'local' }, { output: 'tables', metadata: catalogMeta() }).button).toBeNull();
    });

    it('never turns an id that is not a stored result id into code', () => {
      for (const id of ['cat_0123456789abcdef\nimport os', 'cat_0123456789abcdef; x', '--table secrets', 'cat_0123456789ABCDEF',
        'cat_0123456789abcde', 'cat_0123456789abcdef0', '../../astro.db', ' cat_0123456789abcdef', 'cat_0123456789abcdef ',
        'cat_0123456789abcdef\u2028x', 42, null]) {
        expect(renderCall('cone_search', CONE, { output: 'rows', metadata: catalogMeta({}, id) }).button).toBeNull();
      }
      // the call's own arguments never reach the cell: only the validated id does
      const crafted = { ...CONE, target: 'M 87"\nimport os', catalog: 'x"; os.system("y")' };
      const { button, calls } = renderCall('cone_search', crafted, { output: 'rows', metadata: catalogMeta() });
      button!.click();
      expect(calls).toEqual([['run', `%load_ext astro_jupyter\n%astro sky --result ${ID}`]]);
    });
  });
});
