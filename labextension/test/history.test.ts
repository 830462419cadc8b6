/** Reopening a session: its stored events replay through the same `apply` path as live events,
 * so the rebuilt timeline is the one the user watched (subagents, plans, progress, banners). */
import { describe, expect, it } from 'vitest';

import { TimelineItem, TimelineModel } from '../src/timeline';
import { AgentEvent, IStoredEvent, IStoredMessage } from '../src/tokens';

/** What the view renders of an item tree (keys, versions and clocks left out). */
function shape(items: readonly TimelineItem[]): unknown[] {
  return items.map(i => {
    const base: Record<string, unknown> = { kind: i.kind, runId: i.runId };
    switch (i.kind) {
      case 'user':
        return { kind: i.kind, text: i.text }; // live prompts are shown before their run has an id
      case 'text':
      case 'thinking':
        return { ...base, text: i.text, step: i.step, streaming: i.streaming };
      case 'tool':
        return {
          ...base,
          id: i.id,
          name: i.name,
          arguments: i.arguments,
          status: i.status,
          progress: i.progress,
          result: i.result,
          repeatOf: i.repeatOf?.id ?? null,
          repeats: i.repeats.map(r => r.id)
        };
      case 'subagent':
        return { ...base, id: i.id, task: i.task, phase: i.phase, summary: i.summary, isError: i.isError, children: shape(i.children) };
      case 'todo':
        return { ...base, todos: i.todos, active: i.active };
      case 'notice':
        return { ...base, variant: i.variant, text: i.text };
      case 'question':
        return { ...base, variant: i.variant, question: i.question, answer: i.answer };
      case 'end':
        return { ...base, reason: i.reason, text: i.text };
    }
  });
}

const todos = (a: string, b: string) => [
  { id: '1', content: 'resolve M 87', status: a, blocked_by: [] },
  { id: '2', content: 'summarise', status: b, blocked_by: ['1'] }
];

/** A run as the server streams it: text deltas, a plan, a subagent with its own tools, progress, an end. */
function recordedRun(runId: string, sessionId: string, reason: 'finished' | 'max_steps' = 'finished'): AgentEvent[] {
  const deltas = (text: string, step: number, sub?: string): AgentEvent[] =>
    text.match(/.{1,3}/g)!.map(d => ({ type: 'text_delta', delta: d, step, ...(sub ? { subagent_id: sub } : {}) }) as AgentEvent);
  return [
    { type: 'session', session_id: sessionId, run_id: runId, title: 'M 87', model: 'gpt' },
    { type: 'thinking_delta', delta: 'Plan first.', step: 1 },
    ...deltas('Let me plan this. ', 1),
    { type: 'tool_call', id: `${runId}-todo`, name: 'todo_write', arguments: { todos: [] }, step: 1 },
    { type: 'todo_update', todos: todos('in_progress', 'pending') } as AgentEvent,
    { type: 'tool_result', tool_call_id: `${runId}-todo`, name: 'todo_write', output: 'saved', duration_ms: 2 },
    { type: 'tool_call', id: `${runId}-sub`, name: 'subagent', arguments: { task: 'read the paper' }, step: 2 },
    { type: 'subagent', id: `${runId}-s1`, phase: 'start', task: 'read the paper', parent_tool_call_id: `${runId}-sub` },
    ...deltas('Reading section 2.', 1, `${runId}-s1`),
    { type: 'tool_call', id: `${runId}-q`, name: 'query_target', arguments: { name: 'M 87' }, step: 1, subagent_id: `${runId}-s1` },
    { type: 'tool_progress', id: `${runId}-q`, progress: { done: 1, total: 3, message: 'resolving' }, subagent_id: `${runId}-s1` },
    { type: 'tool_result', tool_call_id: `${runId}-q`, name: 'query_target', output: 'RA 187.7', duration_ms: 40, subagent_id: `${runId}-s1` },
    { type: 'subagent', id: `${runId}-s1`, phase: 'stop', summary: 'M 87 is at RA 187.7' },
    { type: 'tool_result', tool_call_id: `${runId}-sub`, name: 'subagent', output: 'M 87 is at RA 187.7', duration_ms: 900 },
    { type: 'todo_update', todos: todos('completed', 'in_progress') } as AgentEvent,
    { type: 'tool_call', id: `${runId}-dl`, name: 'download_paper', arguments: { id: '2101.00001' }, step: 3 },
    { type: 'tool_progress', id: `${runId}-dl`, progress: { done: 2, total: 5, message: 'downloading' } },
    { type: 'compaction', layer: 'auto', tokens_before: 9000, tokens_after: 3000 },
    { type: 'model_switch', from: 'gpt', to: 'gpt-mini', reason: 'overloaded x3' },
    ...deltas('M 87 is at RA 187.7 deg.', 4),
    { type: 'done', session_id: sessionId, run_id: runId, reason }
  ];
}

/** The server's folding of consecutive deltas (events.fold_deltas), for the stored list. */
function fold(events: IStoredEvent[]): IStoredEvent[] {
  const out: IStoredEvent[] = [];
  for (const e of events) {
    const prev = out[out.length - 1];
    const ev = e.event;
    if (
      prev &&
      (ev.type === 'text_delta' || ev.type === 'thinking_delta') &&
      prev.run_id === e.run_id &&
      prev.event.type === ev.type &&
      (prev.event as any).step === ev.step &&
      (prev.event.subagent_id ?? null) === (ev.subagent_id ?? null)
    ) {
      out[out.length - 1] = { ...e, event: { ...ev, delta: (prev.event as any).delta + ev.delta } };
    } else {
      out.push(e);
    }
  }
  return out;
}

const stored = (runId: string, events: AgentEvent[]): IStoredEvent[] =>
  events.map((event, i) => ({ run_id: runId, seq: i + 1, time: '2026-12-03T01:00:00.000Z', event }));

function prompt(id: number, runId: string, content: string): IStoredMessage {
  return { id, session_id: 's', run_id: runId, role: 'user', content, created_at: '2026-12-03 01:00:00' };
}

describe('reopening a session replays its stored events', () => {
  const runA = recordedRun('rA', 's', 'max_steps');
  const runB = recordedRun('rB', 's');

  function live(): TimelineModel {
    const m = new TimelineModel();
    m.addUser('Where is M 87?');
    runA.forEach((e, i) => m.apply('rA', i + 1, e));
    m.addUser('And again?');
    runB.forEach((e, i) => m.apply('rB', i + 1, e));
    return m;
  }

  const messages: IStoredMessage[] = [
    prompt(1, 'rA', 'Where is M 87?'),
    { id: 2, session_id: 's', run_id: 'rA', role: 'assistant', content: 'Let me plan this. ', tool_calls: [
      { id: 'rA-todo', function: { name: 'todo_write', arguments: '{}' } }] },
    { id: 3, session_id: 's', run_id: 'rA', role: 'tool', content: 'saved', tool_call_id: 'rA-todo' },
    prompt(10, 'rB', 'And again?')
  ];
  const events = [...stored('rA', runA), ...stored('rB', runB)];

  it('rebuilds the same timeline as the live stream, folded or not', () => {
    const expected = shape(live().items);
    for (const list of [events, fold(events)]) {
      const m = new TimelineModel();
      m.loadMessages(messages, null, new Map([['rA', 'max_steps'], ['rB', 'finished']]), list);
      expect(shape(m.items)).toEqual(expected);
    }
    expect(fold(events).length).toBeLessThan(events.length * 0.6);
  });

  it('keeps subagent groups, the pinned plan, progress, tool details and the end banner', () => {
    const m = new TimelineModel();
    m.loadMessages(messages, null, new Map(), fold(events));
    const kinds = m.items.map(i => i.kind);
    expect(kinds.filter(k => k === 'end')).toHaveLength(1); // rA stopped at the step limit
    expect(kinds[1]).toBe('todo'); // the plan sits right after its prompt
    const sub = m.subagent('rA-s1')!;
    expect(sub).toMatchObject({ task: 'read the paper', phase: 'stopped', summary: 'M 87 is at RA 187.7' });
    expect(sub.children.map(c => c.kind)).toEqual(['text', 'tool']);
    expect(m.tool('rA-q')!.progress).toEqual({ done: 1, total: 3, message: 'resolving' });
    expect(m.tool('rA-dl')!.status).toBe('interrupted'); // no result before the end, as live
    expect(m.tool('rA-sub')!.result?.durationMs).toBe(900);
    expect(m.items.some(i => i.kind === 'notice' && i.variant === 'model_switch')).toBe(true);
    expect(m.items.every(i => i.kind === 'user' || i.replayed)).toBe(true);
    // messages linked for search hits
    expect(m.tool('rA-todo')).toMatchObject({ messageId: 2, resultMessageId: 3 });
    expect(m.items.find(i => i.kind === 'text' && i.runId === 'rA')!.messageId).toBe(2);
    expect(m.lastSeqOf('rB')).toBe(runB.length);
  });

  it('continues a run still going: the stream resumes after the last replayed event', () => {
    const m = new TimelineModel();
    const partial = stored('rB', runB.slice(0, 16));
    m.loadMessages([prompt(10, 'rB', 'And again?')], 'rB', new Map([['rB', 'running']]), fold(partial));
    expect(m.lastSeqOf('rB')).toBe(16);
    expect(m.items.find(i => i.kind === 'todo')).toMatchObject({ active: true });
    expect(m.subagent('rB-s1')!.phase).toBe('running');
    // the SSE stream replays from Last-Event-ID 16: earlier ids are dropped, later ones applied
    expect(m.apply('rB', 16, runB[15])).toBe(false);
    runB.slice(16).forEach((e, i) => m.apply('rB', 17 + i, e));
    const whole = new TimelineModel();
    whole.addUser('And again?');
    runB.forEach((e, i) => whole.apply('rB', i + 1, e));
    expect(shape(m.items)).toEqual(shape(whole.items));
  });

  it('closes a run that ended without a stored done as the store says it ended', () => {
    const m = new TimelineModel();
    const cut = stored('rA', runA.slice(0, 16));
    m.loadMessages([prompt(1, 'rA', 'Where is M 87?')], null, new Map([['rA', 'error']]), cut);
    expect(m.items[m.items.length - 1]).toMatchObject({ kind: 'end', reason: 'error' });
    expect(m.items.find(i => i.kind === 'todo')).toMatchObject({ active: false });
  });

  it('replays in slices without announcing each item, one reset at the end', async () => {
    const m = new TimelineModel();
    const changes: string[] = [];
    m.changed.connect((_, c) => changes.push(c.type));
    const ok = await m.loadMessagesAsync(messages, null, new Map(), { sliceMs: 0, events: fold(events) });
    expect(ok).toBe(true);
    expect(changes.filter(c => c !== 'reset')).toEqual([]);
    expect(shape(m.items)).toEqual(shape((() => {
      const n = new TimelineModel();
      n.loadMessages(messages, null, new Map(), events);
      return n.items;
    })()));
  });
});
