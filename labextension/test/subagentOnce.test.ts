// @vitest-environment happy-dom
/** A subagent group says its task and its final text once: the task on the line of the call that
 * started it, the final text as the subagent's own nested text (not again as a summary below it,
 * nor as the call's Result). */
import { describe, expect, it, vi } from 'vitest';

import { TimelineModel } from '../src/timeline';
import { IRenderContext } from '../src/widgets/items';
import { TimelineView } from '../src/widgets/timelineView';
import { AgentEvent } from '../src/tokens';
import { renderContext } from './support';

const TASK = 'Find the redshift of NGC 4993';
const ANSWER = 'NGC 4993 has z = 0.0098 (NED).';

const ctx = (): IRenderContext => renderContext();

/** The text a user sees: what is not inside a hidden element. */
function visible(el: Element): string {
  if ((el as HTMLElement).hidden) {
    return '';
  }
  let out = '';
  for (const n of Array.from(el.childNodes)) {
    out += n.nodeType === 3 ? n.textContent : n.nodeType === 1 ? visible(n as Element) : '';
  }
  return out;
}

const count = (hay: string, needle: string) => hay.split(needle).length - 1;

async function render(summary: string, isError = false): Promise<TimelineView> {
  const model = new TimelineModel();
  const view = new TimelineView(model, ctx());
  document.body.appendChild(view.node);
  const events: AgentEvent[] = [
    { type: 'tool_call', id: 'sub', name: 'subagent', arguments: { task: TASK }, step: 1 },
    { type: 'subagent', id: 's1', phase: 'start', task: TASK, parent_tool_call_id: 'sub' },
    { type: 'tool_call', id: 'q', name: 'query_target', arguments: { name: 'NGC 4993' }, step: 1, subagent_id: 's1' },
    { type: 'tool_result', tool_call_id: 'q', name: 'query_target', output: 'z 0.009727', duration_ms: 40, subagent_id: 's1' },
    { type: 'text_delta', delta: ANSWER, step: 2, subagent_id: 's1' },
    { type: 'subagent', id: 's1', phase: 'stop', task: TASK, parent_tool_call_id: 'sub', summary, is_error: isError },
    { type: 'tool_result', tool_call_id: 'sub', name: 'subagent', output: summary, duration_ms: 900, is_error: isError } as AgentEvent
  ];
  events.forEach((e, i) => model.apply('r1', i + 1, e));
  view.flush();
  // the nested text is rendered on a timer, as it streams
  await vi.waitFor(() => expect(view.node.querySelector('.jp-Astro-subagent .jp-Astro-markdown')!.textContent).toContain(ANSWER));
  return view;
}

describe('subagent group', () => {
  it('shows the task and the final text once each, also with the call expanded', async () => {
    const view = await render(ANSWER);
    let text = visible(view.node);
    expect(count(text, TASK)).toBe(1);
    expect(count(text, ANSWER)).toBe(1);
    // open the call's card: its arguments say the task, its Result does not repeat the answer
    view.node.querySelector<HTMLButtonElement>('.jp-Astro-tool[data-tool-call-id="sub"] > .jp-Astro-tool-line')!.click();
    text = visible(view.node);
    expect(count(text, ANSWER)).toBe(1);
    expect(view.node.querySelector('.jp-Astro-subagent .jp-Astro-subagent-label')!.textContent).toBe('Subagent');
  });

  it('still says what the nested text does not: a step-limit note', async () => {
    const note = '(stopped after 8 steps; the task may be unfinished)';
    const view = await render(`${ANSWER}\n\n${note}`);
    const text = visible(view.node);
    expect(count(text, ANSWER)).toBe(1);
    expect(count(text, note)).toBe(1);
  });
});
