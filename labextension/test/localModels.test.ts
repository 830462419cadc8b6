// @vitest-environment happy-dom
/** What the sidebar shows for a local model's long turns: a calm "preparing <tool>…" line updated in
 * place while the model writes a call (gone once the call arrives), and a visible notice when an
 * answer stopped at the output limit instead of finishing. */
import { describe, expect, it } from 'vitest';

import { TimelineModel } from '../src/timeline';
import { IRenderContext } from '../src/widgets/items';
import { TimelineView } from '../src/widgets/timelineView';
import { AgentEvent } from '../src/tokens';
import { renderContext } from './support';

const ctx = (): IRenderContext => renderContext();

function mount(): { model: TimelineModel; view: TimelineView } {
  const model = new TimelineModel();
  const view = new TimelineView(model, ctx());
  document.body.appendChild(view.node);
  return { model, view };
}

function visibleNotices(view: TimelineView): HTMLElement[] {
  view.flush();
  return Array.from(view.node.querySelectorAll<HTMLElement>('.jp-Astro-notice')).filter(el => !el.hidden);
}

describe('local model turns in the sidebar', () => {
  it('shows one preparing line per call being written, updated in place, gone when the call arrives', () => {
    const { model, view } = mount();
    const events: AgentEvent[] = [
      { type: 'tool_call_preparing', index: 0, name: 'query_target', chars: 0, step: 1 },
      { type: 'tool_call_preparing', index: 0, name: 'query_target', chars: 1234, step: 1 }
    ];
    events.forEach((e, i) => model.apply('r1', i + 1, e));
    let lines = visibleNotices(view);
    expect(lines).toHaveLength(1);
    expect(lines[0].dataset.variant).toBe('preparing');
    expect(lines[0].textContent).toBe('Preparing query_target… (1,234 characters so far)');

    model.apply('r1', 3, { type: 'tool_call', id: 'c1', name: 'query_target', arguments: { name: 'M 31' }, step: 1 });
    lines = visibleNotices(view);
    expect(lines).toHaveLength(0);
    expect(view.node.querySelectorAll('.jp-Astro-tool').length).toBeGreaterThan(0);
  });

  it('says an answer was cut off at the output limit', () => {
    const { model, view } = mount();
    model.apply('r1', 1, { type: 'text_delta', delta: 'The galaxy M 31 is', step: 1 });
    model.apply('r1', 2, {
      type: 'truncated',
      step: 1,
      max_tokens: 1024,
      message: 'The answer was cut off: the model reached its output limit of 1024 tokens.'
    });
    model.apply('r1', 3, { type: 'done', session_id: 's', run_id: 'r1', reason: 'finished' });
    const lines = visibleNotices(view);
    expect(lines.map(el => el.dataset.variant)).toEqual(['truncated']);
    expect(lines[0].textContent).toContain('cut off');
    expect(lines[0].textContent).toContain('1024 tokens');
    expect(lines[0].getAttribute('role')).toBe('note');
  });
});

describe('a looping run with preparing lines', () => {
  it('still folds the same failing call into one line', () => {
    const { model } = mount();
    model.apply('r1', 0, { type: 'session', session_id: 's', run_id: 'r1' } as AgentEvent);
    let seq = 1;
    for (let n = 0; n < 12; n++) {
      // each call is announced while the model writes it, then arrives and fails the same way
      model.apply('r1', seq++, { type: 'tool_call_preparing', index: 0, name: 'read_file', chars: 0, step: n + 1 } as AgentEvent);
      model.apply('r1', seq++, { type: 'tool_call', id: `c${n}`, name: 'read_file', arguments: { path: 'missing.fits' }, step: n + 1 } as AgentEvent);
      model.apply('r1', seq++, {
        type: 'tool_result', tool_call_id: `c${n}`, name: 'read_file', output: 'read_file: missing.fits does not exist',
        is_error: true, step: n + 1
      } as AgentEvent);
    }
    const head = model.tool('c0')!;
    expect(head.repeats.length).toBe(11);
  });
});
