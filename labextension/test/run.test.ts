import { describe, expect, it } from 'vitest';

import { IAstroBackend, RunModel, RunStatus } from '../src/model';
import { TimelineModel } from '../src/timeline';
import { ITextItem } from '../src/timeline';
import { FakeEventServer, sse, until } from './fakeStream';

class FakeBackend implements Partial<IAstroBackend> {
  calls: string[] = [];
  release: (() => void) | null = null;
  async startRun(): Promise<{ run_id: string; session_id: string }> {
    this.calls.push('start');
    await new Promise<void>(r => (this.release = r));
    return { run_id: 'run_9', session_id: 'ses_1' };
  }
  async cancelRun(runId: string) {
    this.calls.push(`cancel ${runId}`);
    return {};
  }
  async answer(runId: string, requestId: string, answer: string) {
    this.calls.push(`answer ${runId} ${requestId} ${answer}`);
    return {};
  }
  eventsUrl(runId: string) {
    return `/astro/api/runs/${runId}/events`;
  }
}

function make() {
  const api = new FakeBackend();
  const server = new FakeEventServer();
  const timeline = new TimelineModel();
  const run = new RunModel({
    api: api as unknown as IAstroBackend,
    timeline,
    request: server.request,
    sseOptions: { initialDelayMs: 1, maxDelayMs: 2 }
  });
  const statuses: RunStatus[] = [];
  run.statusChanged.connect((_, s) => statuses.push(s));
  return { api, server, timeline, run, statuses };
}

describe('RunModel', () => {
  it('Stop before the run id is known cancels as soon as it is', async () => {
    const { api, run, server } = make();
    const started = run.start({ prompt: 'hi' });
    expect(run.active).toBe(true);
    await run.cancel();
    expect(api.calls).toEqual(['start']);
    api.release!();
    await started;
    expect(api.calls).toEqual(['start', 'cancel run_9']);
    const c = await server.connection(0);
    c.write(sse(1, { type: 'done', session_id: 'ses_1', run_id: 'run_9', reason: 'cancelled' }));
    await until(() => run.status === 'done', 'done');
    expect(run.active).toBe(false);
  });

  it('streams into the timeline, shows reconnecting on a drop, resumes without duplicates', async () => {
    const { api, run, server, timeline, statuses } = make();
    const started = run.start({ prompt: 'hi' });
    api.release!();
    await started;
    const c0 = await server.connection(0);
    c0.write(sse(1, { type: 'session', session_id: 'ses_1', run_id: 'run_9' }));
    c0.write(sse(2, { type: 'text_delta', delta: 'Hello ', step: 1 }));
    await until(() => timeline.items.length === 2, 'text');
    c0.fail();
    const c1 = await server.connection(1);
    expect(statuses).toContain('reconnecting');
    expect(c1.headers['last-event-id']).toBe('2');
    c1.write(sse(2, { type: 'text_delta', delta: 'Hello ', step: 1 }));
    c1.write(sse(3, { type: 'text_delta', delta: 'world', step: 1 }));
    c1.write(sse(4, { type: 'done', session_id: 'ses_1', run_id: 'run_9', reason: 'finished' }));
    await until(() => run.status === 'done', 'done');
    expect(timeline.items.map(i => i.kind)).toEqual(['user', 'text']);
    expect((timeline.items[1] as ITextItem).text).toBe('Hello world');
    expect(statuses).toEqual(['starting', 'running', 'reconnecting', 'running', 'done']);
  });

  it('answers a permission request with the run id of the question', async () => {
    const { api, run, server, timeline } = make();
    const started = run.start({ prompt: 'hi' });
    api.release!();
    await started;
    const c0 = await server.connection(0);
    c0.write(sse(1, { type: 'permission_request', request_id: 'req1', tool_call_id: 'c1', name: 'run_bash', arguments: {} }));
    await until(() => !!timeline.question('req1'), 'question');
    expect(await run.answer('req1', 'always')).toBe(true);
    expect(api.calls).toContain('answer run_9 req1 always');
    expect(timeline.question('req1')!.answer).toBe('always');
    run.detach();
  });

  it('attaching to a run already partly shown resumes after the last applied seq', async () => {
    const { run, server, timeline } = make();
    timeline.apply('run_5', 1, { type: 'text_delta', delta: 'a', step: 1 });
    timeline.apply('run_5', 2, { type: 'text_delta', delta: 'b', step: 1 });
    run.attach('run_5', 'ses_1');
    const c0 = await server.connection(0);
    expect(c0.headers['last-event-id']).toBe('2');
    run.detach();
  });
});
