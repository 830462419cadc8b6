/** The chat-level behaviour of the timeline: repeated calls fold into one line, a tool that
 * waits for permission says so, cancelled calls read cancelled, one pinned plan per run,
 * a banner at the end of a run that stopped, and history that knows how its runs ended. */
import { describe, expect, it } from 'vitest';

import { parseTime, TimelineModel } from '../src/timeline';
import { AgentEvent, IStoredEvent, IStoredMessage } from '../src/tokens';

function feed(model: TimelineModel, events: AgentEvent[], runId = 'run_1', start = 1): void {
  events.forEach((e, i) => model.apply(runId, start + i, e));
}

/** A run's events as the store returns them. */
const stored = (runId: string, events: AgentEvent[]): IStoredEvent[] =>
  events.map((event, i) => ({ run_id: runId, seq: i + 1, time: '2026-12-02T20:01:03Z', event }));

const call = (id: string, args: unknown = { name: 'M31' }, name = 'query_target'): AgentEvent => ({
  type: 'tool_call',
  id,
  name,
  arguments: args,
  step: 1
});
const fail = (id: string, output = 'Error: service unavailable', name = 'query_target'): AgentEvent => ({
  type: 'tool_result',
  tool_call_id: id,
  name,
  output,
  is_error: true,
  duration_ms: 10
});

describe('chat timeline', () => {
  it('folds 18 identical failing calls into one line with a count', () => {
    const m = new TimelineModel();
    const events: AgentEvent[] = [];
    for (let i = 0; i < 18; i++) {
      events.push(call(`c${i}`), fail(`c${i}`));
    }
    feed(m, events);
    const head = m.tool('c0')!;
    expect(head.repeats.map(t => t.id)).toEqual(Array.from({ length: 17 }, (_, i) => `c${i + 1}`));
    expect(m.tool('c17')!.repeatOf).toBe(head);
    expect(m.items.filter(i => i.kind === 'tool' && !i.repeatOf)).toEqual([head]);
  });

  it('folds identical errors of different arguments, but not different calls that succeed', () => {
    const m = new TimelineModel();
    feed(m, [
      call('a', { name: 'X1' }),
      fail('a', 'Error: not found'),
      call('b', { name: 'X2' }),
      fail('b', 'Error: not found'),
      call('c', { name: 'M31' }),
      { type: 'tool_result', tool_call_id: 'c', name: 'query_target', output: 'ok' },
      call('d', { name: 'M33' }),
      { type: 'tool_result', tool_call_id: 'd', name: 'query_target', output: 'ok' }
    ]);
    expect(m.tool('b')!.repeatOf).toBe(m.tool('a'));
    expect(m.tool('c')!.repeatOf).toBeNull();
    expect(m.tool('d')!.repeatOf).toBeNull();
  });

  it('does not fold calls separated by text', () => {
    const m = new TimelineModel();
    feed(m, [call('a'), { type: 'text_delta', delta: 'again', step: 2 }, call('b')]);
    expect(m.tool('b')!.repeatOf).toBeNull();
  });

  it('marks a tool waiting for permission until it is answered, and a cancelled one as cancelled', () => {
    const m = new TimelineModel();
    feed(m, [
      call('bash', { command: 'ls' }, 'run_bash'),
      { type: 'permission_request', request_id: 'r1', tool_call_id: 'bash', name: 'run_bash', arguments: { command: 'ls' } }
    ]);
    expect(m.tool('bash')!.status).toBe('waiting');
    m.setAnswer('r1', 'allow', { pending: true });
    expect(m.tool('bash')!.status).toBe('waiting');
    m.setAnswer('r1', 'allow');
    expect(m.tool('bash')!.status).toBe('running');
    feed(
      m,
      [
        { type: 'tool_result', tool_call_id: 'bash', name: 'run_bash', output: 'Error: run_bash was cancelled by the user.', is_error: true, metadata: { cancelled: true } },
        call('late'),
        { type: 'done', session_id: 's', run_id: 'run_1', reason: 'cancelled' }
      ],
      'run_1',
      3
    );
    expect(m.tool('bash')!.status).toBe('cancelled');
    expect(m.tool('late')!.status).toBe('cancelled');
  });

  it('keeps one plan per run, updated in place, placed just after the prompt', () => {
    const m = new TimelineModel();
    m.addUser('Plan it');
    feed(m, [
      { type: 'text_delta', delta: 'Planning', step: 1 },
      { type: 'todo_update', todos: [{ id: '1', content: 'a', status: 'in_progress', blocked_by: [] }] },
      call('x'),
      { type: 'todo_update', todos: [{ id: '2', content: 'a', status: 'completed', blocked_by: [] }, { id: '3', content: 'b', status: 'pending', blocked_by: [] }] }
    ]);
    expect(m.items.map(i => i.kind)).toEqual(['user', 'todo', 'text', 'tool']);
    const todo = m.items[1];
    expect(todo.kind === 'todo' && todo.todos.length).toBe(2);
    expect(todo.kind === 'todo' && todo.active).toBe(true);
    feed(m, [{ type: 'done', session_id: 's', run_id: 'run_1', reason: 'finished' }], 'run_1', 10);
    expect(todo.kind === 'todo' && todo.active).toBe(false);
  });

  it('ends a run at the step limit with a banner; a finished run has none', () => {
    const m = new TimelineModel();
    feed(m, [{ type: 'done', session_id: 's', run_id: 'run_1', reason: 'max_steps' }]);
    expect(m.items[m.items.length - 1]).toMatchObject({ kind: 'end', reason: 'max_steps', runId: 'run_1' });
    feed(m, [{ type: 'done', session_id: 's', run_id: 'run_2', reason: 'finished' }], 'run_2');
    expect(m.items.filter(i => i.kind === 'end')).toHaveLength(1);
  });

  it('history: banners after runs that stopped, timestamps from created_at, repeated calls folded', () => {
    const m = new TimelineModel();
    const messages: IStoredMessage[] = [
      { id: 1, session_id: 's', run_id: 'r1', role: 'user', content: 'loop', created_at: '2026-12-02 20:01:02' },
      { id: 6, session_id: 's', run_id: 'r2', role: 'user', content: 'next' }
    ];
    const events = [
      ...stored('r1', [call('a'), fail('a', 'Error: x'), call('b'), fail('b', 'Error: x')]),
      ...stored('r2', [{ type: 'text_delta', delta: 'fine', step: 1 }, { type: 'done', session_id: 's', run_id: 'r2', reason: 'finished' }])
    ];
    m.loadMessages(messages, null, new Map([['r1', 'max_steps'], ['r2', 'finished']]), events);
    expect(m.items.map(i => i.kind)).toEqual(['user', 'tool', 'tool', 'end', 'user', 'text']);
    expect(m.tool('b')!.repeatOf).toBe(m.tool('a'));
    expect(m.items[0].time).toBe(Date.UTC(2026, 11, 2, 20, 1, 2));
  });

  it('parses the timestamps the store writes', () => {
    expect(parseTime('2026-12-02T20:01:02.123Z')).toBe(Date.UTC(2026, 11, 2, 20, 1, 2, 123));
    expect(parseTime('2026-12-02 20:01:02')).toBe(Date.UTC(2026, 11, 2, 20, 1, 2));
    expect(parseTime('nonsense')).toBeUndefined();
    expect(parseTime(undefined)).toBeUndefined();
  });
});

describe('loading a long history', () => {
  // 1500 runs: a prompt each (a message) and an answer (its stored events)
  const runs = Array.from({ length: 1500 }, (_, i) => `r${i}`);
  const history = (): IStoredMessage[] =>
    runs.map((r, i) => ({ id: i + 1, session_id: 's', run_id: r, role: 'user', content: `q${i}` }));
  const events = runs.flatMap((r, i) =>
    stored(r, [{ type: 'text_delta', delta: `a${i}`, step: 1 }, { type: 'done', session_id: 's', run_id: r, reason: 'finished' }])
  );

  it('loads in slices with one reset at the end, the same items as the one-shot load', async () => {
    const a = new TimelineModel();
    a.loadMessages(history(), null, new Map(), events);
    expect(a.items.length).toBe(3000);
    const b = new TimelineModel();
    const changes: string[] = [];
    b.changed.connect((_, c) => changes.push(c.type));
    let slices = 0;
    const ok = await b.loadMessagesAsync(history(), null, new Map(), { sliceMs: 0, stale: () => (slices++, false), events });
    expect(ok).toBe(true);
    expect(slices).toBeGreaterThan(10); // it yielded between slices
    expect(changes).toEqual(['reset']);
    expect(b.items.map(i => i.kind === 'user' || i.kind === 'text' ? i.text : '')).toEqual(
      a.items.map(i => i.kind === 'user' || i.kind === 'text' ? i.text : '')
    );
  });

  it('stops when another session is opened meanwhile', async () => {
    const m = new TimelineModel();
    let calls = 0;
    const ok = await m.loadMessagesAsync(history(), null, new Map(), { sliceMs: 0, stale: () => ++calls > 2, events });
    expect(ok).toBe(false);
    expect(m.items.length).toBeLessThan(3000);
  });
});
