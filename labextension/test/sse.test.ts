import { describe, expect, it } from 'vitest';

import { ISSEMessage, SSEClient, SSEParser, SSEState } from '../src/sse';
import { FakeEventServer, sse, until } from './fakeStream';

const fast = { initialDelayMs: 1, maxDelayMs: 4 };

function collect(client: SSEClient) {
  const messages: ISSEMessage[] = [];
  const states: SSEState[] = [];
  client.message.connect((_, m) => messages.push(m));
  client.stateChanged.connect((_, s) => states.push(s));
  return { messages, states };
}

describe('SSEParser', () => {
  it('parses messages split at any byte, with \\r\\n and \\r line ends, ignoring comments', () => {
    const text = ': hello\r\nid: 1\r\ndata: {"a":1}\r\n\r\nid: 2\rdata: line1\rdata: line2\r\revent: x\nid: 3\ndata: z\n\n';
    for (let cut = 0; cut < text.length; cut++) {
      const p = new SSEParser();
      const out = [...p.push(text.slice(0, cut)), ...p.push(text.slice(cut))];
      expect(out, `cut at ${cut}`).toEqual([
        { id: '1', event: 'message', data: '{"a":1}' },
        { id: '2', event: 'message', data: 'line1\nline2' },
        { id: '3', event: 'x', data: 'z' }
      ]);
      expect(p.lastEventId).toBe('3');
    }
  });

  it('does not dispatch a message without data', () => {
    const p = new SSEParser();
    expect(p.push('id: 7\n\n: keepalive\n\n')).toEqual([]);
    expect(p.lastEventId).toBe('7');
  });
});

describe('SSEClient', () => {
  it('streams messages and stops after a terminal one without reconnecting', async () => {
    const server = new FakeEventServer();
    const client = new SSEClient({
      url: '/events',
      request: server.request,
      isTerminal: m => JSON.parse(m.data).type === 'done',
      ...fast
    });
    const { messages, states } = collect(client);
    const done = client.start();
    const c0 = await server.connection(0);
    expect(c0.headers['accept']).toBe('text/event-stream');
    expect(c0.headers['last-event-id']).toBeUndefined();
    c0.write(sse(1, { type: 'text_delta', delta: 'a' }));
    c0.write(sse(2, { type: 'done' }));
    await done;
    expect(messages.map(m => m.id)).toEqual(['1', '2']);
    expect(server.connections).toHaveLength(1);
    expect(states).toEqual(['connecting', 'open', 'closed']);
  });

  it('reconnects after a drop with Last-Event-ID, shows reconnecting, and delivers no duplicates', async () => {
    const server = new FakeEventServer();
    const client = new SSEClient({
      url: '/events',
      request: server.request,
      isTerminal: m => JSON.parse(m.data).type === 'done',
      ...fast
    });
    const { messages, states } = collect(client);
    const done = client.start();
    const c0 = await server.connection(0);
    c0.write(sse(1, { type: 'text_delta', delta: 'a' }));
    c0.write(sse(2, { type: 'text_delta', delta: 'b' }));
    await until(() => messages.length === 2, 'two messages');
    c0.fail(); // the network drops mid-run

    const c1 = await server.connection(1);
    expect(states).toContain('reconnecting');
    expect(c1.headers['last-event-id']).toBe('2');
    // A server that replays a little too much: 2 again, then 3.
    c1.write(sse(2, { type: 'text_delta', delta: 'b' }));
    c1.write(sse(3, { type: 'text_delta', delta: 'c' }));
    c1.end(); // clean close without done: reconnect again
    const c2 = await server.connection(2);
    expect(c2.headers['last-event-id']).toBe('3');
    c2.write(sse(4, { type: 'done' }));
    await done;
    expect(messages.map(m => m.id)).toEqual(['1', '2', '3', '4']);
    expect(client.lastEventId).toBe('4');
  });

  it('resumes from a given Last-Event-ID on the first connection', async () => {
    const server = new FakeEventServer();
    const client = new SSEClient({ url: '/e', request: server.request, lastEventId: '41', ...fast });
    const { messages } = collect(client);
    void client.start();
    const c0 = await server.connection(0);
    expect(c0.headers['last-event-id']).toBe('41');
    c0.write(sse(40, { type: 'x' }) + sse(42, { type: 'y' }));
    await until(() => messages.length === 1, 'one message');
    expect(messages[0].id).toBe('42');
    client.close();
    expect(client.state).toBe('closed');
  });

  it('retries 5xx with backoff but gives up on 404 with a failure signal', async () => {
    const server = new FakeEventServer();
    server.statuses = [503, 404];
    const slept: number[] = [];
    const client = new SSEClient({
      url: '/e',
      request: server.request,
      initialDelayMs: 100,
      sleep: async ms => {
        slept.push(ms);
      }
    });
    const failures: Error[] = [];
    client.failed.connect((_, e) => failures.push(e));
    await client.start();
    expect(server.connections).toHaveLength(2);
    expect(slept).toEqual([100]);
    expect(failures).toHaveLength(1);
    expect(failures[0].message).toBe('status 404');
    expect(client.state).toBe('closed');
  });

  it('backs off exponentially up to the maximum and stops after maxAttempts', async () => {
    const server = new FakeEventServer();
    server.statuses = [500, 500, 500, 500, 500, 500];
    const slept: number[] = [];
    const client = new SSEClient({
      url: '/e',
      request: server.request,
      initialDelayMs: 100,
      maxDelayMs: 350,
      maxAttempts: 4,
      sleep: async ms => {
        slept.push(ms);
      }
    });
    const failures: Error[] = [];
    client.failed.connect((_, e) => failures.push(e));
    await client.start();
    expect(slept).toEqual([100, 200, 350, 350]);
    expect(server.connections).toHaveLength(5);
    expect(failures).toHaveLength(1);
  });

  it('close() aborts the open request and does not reconnect', async () => {
    const server = new FakeEventServer();
    const client = new SSEClient({ url: '/e', request: server.request, ...fast });
    const done = client.start();
    const c0 = await server.connection(0);
    client.close();
    await done;
    expect(c0.signal?.aborted).toBe(true);
    expect(server.connections).toHaveLength(1);
  });
});
