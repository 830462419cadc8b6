import { describe, expect, it } from 'vitest';

import { IQuestionItem, ISubagentItem, ITextItem, IToolItem, TimelineChange, TimelineModel } from '../src/timeline';
import { AgentEvent, IStoredEvent, IStoredMessage } from '../src/tokens';

function feed(model: TimelineModel, events: AgentEvent[], runId = 'run_1', start = 1): void {
  events.forEach((e, i) => model.apply(runId, start + i, e));
}

describe('TimelineModel', () => {
  it('streams text deltas of one step into one item and starts a new one after a tool call', () => {
    const m = new TimelineModel();
    feed(m, [
      { type: 'text_delta', delta: 'Hel', step: 1 },
      { type: 'text_delta', delta: 'lo', step: 1 },
      { type: 'tool_call', id: 'c1', name: 'query_target', arguments: { name: 'M31' }, step: 1 },
      { type: 'text_delta', delta: 'Done', step: 2 }
    ]);
    expect(m.items.map(i => i.kind)).toEqual(['text', 'tool', 'text']);
    expect((m.items[0] as ITextItem).text).toBe('Hello');
    expect((m.items[2] as ITextItem).text).toBe('Done');
  });

  it('matches tool results and progress to calls by tool_call_id, including interleaved calls', () => {
    const m = new TimelineModel();
    feed(m, [
      { type: 'tool_call', id: 'a', name: 'query_target', arguments: { name: 'M31' }, step: 1 },
      { type: 'tool_call', id: 'b', name: 'query_target', arguments: { name: 'M42' }, step: 1 },
      { type: 'tool_progress', id: 'b', progress: { done: 1, total: 2, message: 'resolving' } },
      { type: 'tool_result', tool_call_id: 'b', name: 'query_target', output: 'M42 ok', duration_ms: 12 },
      { type: 'tool_result', tool_call_id: 'a', name: 'query_target', output: 'not found', is_error: true, duration_ms: 30 }
    ]);
    const a = m.tool('a')!;
    const b = m.tool('b')!;
    expect(m.items).toEqual([a, b]);
    expect(b.progress).toEqual({ done: 1, total: 2, message: 'resolving' });
    expect(b.result).toMatchObject({ output: 'M42 ok', isError: false, durationMs: 12 });
    expect(b.status).toBe('done');
    expect(a.result?.output).toBe('not found');
    expect(a.status).toBe('error');
  });

  it('tolerates a result (and progress) arriving before its call', () => {
    const m = new TimelineModel();
    feed(m, [
      { type: 'tool_progress', id: 'x', progress: { done: null, total: null, message: 'starting' } },
      { type: 'tool_result', tool_call_id: 'x', name: 'read_file', output: 'content', duration_ms: 5 },
      { type: 'tool_call', id: 'x', name: 'read_file', arguments: { path: 'a.txt' }, step: 1 }
    ]);
    expect(m.items).toHaveLength(1);
    const x = m.tool('x')!;
    expect(x).toMatchObject({ name: 'read_file', arguments: { path: 'a.txt' }, callSeen: true, status: 'done' });
    expect(x.result?.output).toBe('content');
  });

  it('nests subagent events under their subagent, and subagents inside subagents', () => {
    const m = new TimelineModel();
    feed(m, [
      { type: 'tool_call', id: 'c1', name: 'subagent', arguments: { task: 'read' }, step: 1 },
      { type: 'subagent', id: 's1', phase: 'start', task: 'read the paper', parent_tool_call_id: 'c1' },
      { type: 'text_delta', delta: 'parent text', step: 1 },
      { type: 'text_delta', delta: 'child ', step: 1, subagent_id: 's1' },
      { type: 'text_delta', delta: 'text', step: 1, subagent_id: 's1' },
      { type: 'tool_call', id: 'c2', name: 'read_file', arguments: {}, step: 1, subagent_id: 's1' },
      { type: 'subagent', id: 's2', phase: 'start', task: 'inner', subagent_id: 's1' },
      { type: 'tool_call', id: 'c3', name: 'grep_files', arguments: {}, step: 1, subagent_id: 's2' },
      { type: 'tool_result', tool_call_id: 'c2', name: 'read_file', output: 'ok', subagent_id: 's1' },
      { type: 'subagent', id: 's2', phase: 'stop', summary: 'inner done', subagent_id: 's1' },
      { type: 'subagent', id: 's1', phase: 'stop', summary: 'summary' }
    ]);
    expect(m.items.map(i => i.kind)).toEqual(['tool', 'subagent', 'text']);
    const s1 = m.subagent('s1')!;
    expect(s1).toMatchObject({ task: 'read the paper', parentToolCallId: 'c1', phase: 'stopped', summary: 'summary' });
    expect(s1.children.map(i => i.kind)).toEqual(['text', 'tool', 'subagent']);
    expect((s1.children[0] as ITextItem).text).toBe('child text');
    expect((s1.children[0] as ITextItem).streaming).toBe(false);
    expect(m.tool('c2')!.parent).toBe(s1);
    const s2 = s1.children[2] as ISubagentItem;
    expect(s2.id).toBe('s2');
    expect(s2.children).toEqual([m.tool('c3')]);
    expect((m.items[2] as ITextItem).text).toBe('parent text');
  });

  it('places a subagent under its parent even when its children arrive first', () => {
    const m = new TimelineModel();
    const changes: TimelineChange[] = [];
    m.changed.connect((_, c) => changes.push(c));
    feed(m, [
      { type: 'subagent', id: 'p', phase: 'start', task: 'outer' },
      { type: 'text_delta', delta: 'early', step: 1, subagent_id: 'q' },
      { type: 'subagent', id: 'q', phase: 'start', task: 'inner', subagent_id: 'p' }
    ]);
    expect(m.items.map(i => (i as ISubagentItem).id)).toEqual(['p']);
    const q = m.subagent('q')!;
    expect(m.subagent('p')!.children).toEqual([q]);
    expect(q.parent).toBe(m.subagent('p'));
    expect(changes.some(c => c.type === 'reset')).toBe(true);
  });

  it('drops replayed events by seq, per run', () => {
    const m = new TimelineModel();
    const ev: AgentEvent = { type: 'text_delta', delta: 'a', step: 1 };
    expect(m.apply('r1', 1, ev)).toBe(true);
    expect(m.apply('r1', 2, { type: 'tool_call', id: 'c', name: 't', arguments: {}, step: 1 })).toBe(true);
    expect(m.apply('r1', 1, ev)).toBe(false);
    expect(m.apply('r1', 2, { type: 'tool_call', id: 'c', name: 't', arguments: {}, step: 1 })).toBe(false);
    expect(m.apply('r2', 1, ev)).toBe(true); // another run has its own sequence
    expect(m.duplicates).toBe(2);
    expect(m.lastSeqOf('r1')).toBe(2);
    expect(m.items.map(i => i.kind)).toEqual(['text', 'tool', 'text']);
    expect((m.items[0] as ITextItem).text).toBe('a');
  });

  it('records questions, answers, and expires unanswered ones at done', () => {
    const m = new TimelineModel();
    feed(m, [
      { type: 'permission_request', request_id: 'p1', tool_call_id: 'c1', name: 'run_bash', arguments: { cmd: 'ls' }, message: 'Run ls?' },
      { type: 'ask_user', request_id: 'q1', question: 'Which one?', options: ['A', 'B'] }
    ]);
    const p = m.question('p1')!;
    expect(p).toMatchObject({ variant: 'permission', toolName: 'run_bash', question: 'Run ls?', answer: null });
    m.setAnswer('p1', 'allow');
    expect(m.question('p1')!.answer).toBe('allow');
    feed(m, [{ type: 'done', session_id: 's', run_id: 'run_1', reason: 'cancelled' }], 'run_1', 10);
    expect((m.question('q1') as IQuestionItem).answer).toBe('expired');
    expect(m.items[m.items.length - 1]).toMatchObject({ kind: 'end', reason: 'cancelled', text: 'Run stopped.' });
  });

  it('a stored question_answered closes the question: a replayed run shows what was answered, not expired', () => {
    const m = new TimelineModel();
    feed(m, [
      { type: 'tool_call', id: 'c1', name: 'run_bash', arguments: { cmd: 'ls' }, step: 1 },
      { type: 'permission_request', request_id: 'p1', tool_call_id: 'c1', name: 'run_bash', arguments: { cmd: 'ls' }, message: 'Run ls?' },
      { type: 'question_answered', request_id: 'p1', answer: 'always' },
      { type: 'ask_user', request_id: 'q1', question: 'Which one?', options: ['A', 'B'] },
      { type: 'question_answered', request_id: 'q1', answer: 'B' },
      { type: 'ask_user', request_id: 'q2', question: 'Unanswered?', options: [] },
      { type: 'question_answered', request_id: 'nope', answer: 'x' },
      { type: 'done', session_id: 's', run_id: 'run_1', reason: 'finished' }
    ]);
    expect(m.question('p1')).toMatchObject({ answer: 'always', pending: false });
    expect(m.question('q1')!.answer).toBe('B');
    expect(m.question('q2')!.answer).toBe('expired');
  });

  it('an answer given in this tab is not overwritten by its own echo', () => {
    const m = new TimelineModel();
    feed(m, [{ type: 'ask_user', request_id: 'q1', question: 'Which one?', options: ['A', 'B'] }]);
    m.setAnswer('q1', 'A');
    feed(m, [{ type: 'question_answered', request_id: 'q1', answer: 'A' }], 'run_1', 2);
    expect(m.question('q1')).toMatchObject({ answer: 'A', pending: false, error: null });
  });

  it('marks still-running tools interrupted at done, leaves finished ones alone', () => {
    const m = new TimelineModel();
    const finished: string[] = [];
    m.finished.connect((_, f) => finished.push(f.reason));
    feed(m, [
      { type: 'tool_call', id: 'a', name: 'x', arguments: {}, step: 1 },
      { type: 'tool_call', id: 'b', name: 'y', arguments: {}, step: 1 },
      { type: 'tool_result', tool_call_id: 'a', name: 'x', output: 'ok' },
      { type: 'done', session_id: 's', run_id: 'run_1', reason: 'finished' }
    ]);
    expect(m.tool('a')!.status).toBe('done');
    expect(m.tool('b')!.status).toBe('interrupted');
    expect(finished).toEqual(['finished']);
    expect(m.items.every(i => i.kind !== 'notice')).toBe(true);
  });

  it('shows notices for compaction, model switch, errors, and keeps todo lists', () => {
    const m = new TimelineModel();
    feed(m, [
      { type: 'compaction', layer: 'auto', tokens_before: 9000, tokens_after: 1200 },
      { type: 'model_switch', from: 'big', to: 'small', reason: 'overloaded x3' },
      { type: 'error', message: 'boom' },
      { type: 'todo_update', todos: [{ id: '1', content: 'read', status: 'in_progress', blocked_by: [] }] }
    ]);
    // the plan goes to the top of the run (no prompt here: the very top)
    expect(m.items.map(i => (i.kind === 'notice' ? i.variant : i.kind))).toEqual(['todo', 'compaction', 'model_switch', 'error']);
    expect((m.items[2] as any).text).toBe('Model switched: big → small (overloaded x3)');
  });

  it('rebuilds history from stored events, links the messages, and leaves an active run to its stream', () => {
    const m = new TimelineModel();
    const messages: IStoredMessage[] = [
      { id: 1, session_id: 's', run_id: 'r1', role: 'user', content: 'Where is M31?' },
      {
        id: 2,
        session_id: 's',
        run_id: 'r1',
        role: 'assistant',
        content: '',
        tool_calls: [{ id: 'c1', type: 'function', function: { name: 'query_target', arguments: '{"name":"M31"}' } }]
      },
      { id: 3, session_id: 's', run_id: 'r1', role: 'tool', content: 'RA 10.68', tool_call_id: 'c1', name: 'query_target' },
      { id: 4, session_id: 's', run_id: 'r1', role: 'assistant', content: 'It is at RA 10.68.' },
      { id: 5, session_id: 's', run_id: 'r2', role: 'user', content: 'And M42?' },
      { id: 6, session_id: 's', run_id: 'r2', role: 'assistant', content: 'partial, comes from the stream' }
    ];
    const r1: AgentEvent[] = [
      { type: 'tool_call', id: 'c1', name: 'query_target', arguments: { name: 'M31' }, step: 1 },
      { type: 'tool_result', tool_call_id: 'c1', name: 'query_target', output: 'RA 10.68', duration_ms: 3 },
      { type: 'text_delta', delta: 'It is at RA 10.68.', step: 2 },
      { type: 'done', session_id: 's', run_id: 'r1', reason: 'finished' }
    ];
    const events: IStoredEvent[] = r1.map((event, i) => ({ run_id: 'r1', seq: i + 1, time: '2026-12-02T20:01:02Z', event }));
    m.loadMessages(messages, 'r2', new Map([['r1', 'finished'], ['r2', 'running']]), events);
    expect(m.items.map(i => i.kind)).toEqual(['user', 'tool', 'text', 'user']);
    const tool = m.tool('c1') as IToolItem;
    expect(tool).toMatchObject({ name: 'query_target', arguments: { name: 'M31' }, status: 'done', messageId: 2, resultMessageId: 3 });
    expect(tool.result?.output).toBe('RA 10.68');
    expect(m.items[2].messageId).toBe(4);
    expect(m.items[3].messageId).toBe(5);
  });
});
