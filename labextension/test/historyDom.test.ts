// @vitest-environment happy-dom
/** The same check as history.test.ts, on the DOM the sidebar renders: a session rebuilt from
 * its stored events shows exactly the markup its live stream produced. */
import { describe, expect, it } from 'vitest';

import { TimelineModel } from '../src/timeline';
import { IRenderContext } from '../src/widgets/items';
import { TimelineView } from '../src/widgets/timelineView';
import { AgentEvent, IStoredEvent, IStoredMessage } from '../src/tokens';
import { renderContext } from './support';

const todos = (a: string, b: string) => [
  { id: '1', content: 'resolve M 87', status: a, blocked_by: [] },
  { id: '2', content: 'summarise', status: b, blocked_by: ['1'] }
];

const run: AgentEvent[] = [
  { type: 'session', session_id: 's', run_id: 'r1' },
  ...'Let me plan this. '.match(/.{1,3}/g)!.map(d => ({ type: 'text_delta', delta: d, step: 1 }) as AgentEvent),
  { type: 'tool_call', id: 't1', name: 'todo_write', arguments: { todos: [] }, step: 1 },
  { type: 'todo_update', todos: todos('in_progress', 'pending') } as AgentEvent,
  { type: 'tool_result', tool_call_id: 't1', name: 'todo_write', output: 'saved', duration_ms: 2 },
  { type: 'tool_call', id: 'sub', name: 'subagent', arguments: { task: 'read the paper' }, step: 2 },
  { type: 'subagent', id: 's1', phase: 'start', task: 'read the paper', parent_tool_call_id: 'sub' },
  { type: 'tool_call', id: 'q', name: 'query_target', arguments: { name: 'M 87' }, step: 1, subagent_id: 's1' },
  { type: 'tool_progress', id: 'q', progress: { done: 1, total: 3, message: 'resolving' }, subagent_id: 's1' },
  { type: 'tool_result', tool_call_id: 'q', name: 'query_target', output: 'RA 187.7', duration_ms: 40, subagent_id: 's1' },
  { type: 'subagent', id: 's1', phase: 'stop', summary: 'M 87 is at RA 187.7' },
  { type: 'tool_result', tool_call_id: 'sub', name: 'subagent', output: 'M 87 is at RA 187.7', duration_ms: 900 },
  { type: 'todo_update', todos: todos('completed', 'in_progress') } as AgentEvent,
  { type: 'tool_call', id: 'dl', name: 'download_paper', arguments: { id: '2101.00001' }, step: 3 },
  { type: 'tool_progress', id: 'dl', progress: { done: 2, total: 5, message: 'downloading' } },
  { type: 'model_switch', from: 'gpt', to: 'gpt-mini', reason: 'overloaded x3' },
  { type: 'error', message: 'the step limit was reached' },
  { type: 'done', session_id: 's', run_id: 'r1', reason: 'max_steps' }
];

const ctx = (): IRenderContext => renderContext();

/** The markup, minus what differs by construction: item keys and clock times. */
function markup(view: TimelineView): string {
  view.flush();
  const clone = view.node.cloneNode(true) as HTMLElement;
  clone.querySelectorAll('[data-key]').forEach(el => el.removeAttribute('data-key'));
  clone.querySelectorAll('time').forEach(el => el.remove());
  return clone.innerHTML;
}

describe('reopened session, rendered', () => {
  it('renders the same DOM from stored events as from the live stream', () => {
    const liveModel = new TimelineModel();
    const live = new TimelineView(liveModel, ctx());
    document.body.appendChild(live.node);
    liveModel.addUser('Where is M 87?');
    live.flush();
    run.forEach((e, i) => {
      liveModel.apply('r1', i + 1, e);
      if (i % 5 === 0) {
        live.flush(); // the live view renders as events arrive
      }
    });

    const prompt: IStoredMessage = { id: 1, session_id: 's', run_id: 'r1', role: 'user', content: 'Where is M 87?' };
    const stored: IStoredEvent[] = run.map((event, i) => ({ run_id: 'r1', seq: i + 1, time: '2026-12-03T01:00:00Z', event }));
    const replayModel = new TimelineModel();
    const replayed = new TimelineView(replayModel, ctx());
    document.body.appendChild(replayed.node);
    replayModel.loadMessages([prompt], null, new Map([['r1', 'max_steps']]), stored);

    const html = markup(replayed);
    expect(html).toContain('jp-Astro-subagent');
    expect(html).toContain('jp-Astro-todo');
    expect(html).toContain('data-status="interrupted"');
    expect(html.replace(/ data-message-id="\d+"/g, '')).toEqual(markup(live).replace(/ data-message-id="\d+"/g, ''));
  });
});

describe('reopened session, times', () => {
  it('stamps the agent header with when the run happened, not when it was reopened', () => {
    const prompt: IStoredMessage = { id: 1, session_id: 's', run_id: 'r1', role: 'user', content: 'Where is M 87?',
      created_at: '2026-01-05T09:30:00Z' } as IStoredMessage;
    // the first thing the agent did was a tool call (no text item carries a time of its own)
    const stored: IStoredEvent[] = run.slice(0, 1).concat(run.slice(7)).map((event, i) => ({
      run_id: 'r1', seq: i + 1, time: '2026-01-05T09:31:00Z', event
    }));
    const model = new TimelineModel();
    const view = new TimelineView(model, ctx());
    document.body.appendChild(view.node);
    model.loadMessages([prompt], null, new Map([['r1', 'max_steps']]), stored);
    view.flush();
    const times = Array.from(view.node.querySelectorAll('time')).map(t => t.getAttribute('datetime'));
    expect(times).toEqual(['2026-01-05T09:30:00.000Z', '2026-01-05T09:31:00.000Z']);
    for (const item of model.walk(model.items)) {
      expect(item.time).toBe(Date.parse('2026-01-05T09:31:00Z') - (item.kind === 'user' ? 60_000 : 0));
    }
  });
});
