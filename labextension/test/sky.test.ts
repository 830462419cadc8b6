// @vitest-environment happy-dom
/** "Show on sky": a resolved query_target offers the `%astro sky` cell, run through the panel's
 * code action (insert below the active cell and run it); a name that is not a plain object name
 * never becomes code. */
import { describe, expect, it } from 'vitest';

import { skyCell } from '../src/sky';
import { TimelineModel } from '../src/timeline';
import { IToolItem } from '../src/timelineItems';
import { IRenderContext } from '../src/widgets/items';
import { TimelineView } from '../src/widgets/timelineView';
import { AgentEvent } from '../src/tokens';

const RESOLVED = { main_id: 'NGC  1275', ra_deg: 49.9507, dec_deg: 41.5117, otype: 'Sy2' };

function render(name: unknown, result: { output: string; is_error?: boolean; metadata?: Record<string, unknown> }) {
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
    { type: 'tool_call', id: 'q', name: 'query_target', arguments: { name }, step: 1 },
    { type: 'tool_result', tool_call_id: 'q', name: 'query_target', output: result.output, is_error: result.is_error ?? false, metadata: result.metadata ?? {}, duration_ms: 12 } as AgentEvent
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
});
