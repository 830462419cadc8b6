import { ServerConnection } from '@jupyterlab/services';
import { describe, expect, it } from 'vitest';

import { AstroAPI, AstroAPIError, readJsonLines } from '../src/handler';
import { nextTask } from '../src/tasks';

/** A streamed reply whose body arrives in these chunks (cut anywhere, even inside a character). */
function streamed(chunks: Uint8Array[], init: ResponseInit = {}): Response {
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      for (const c of chunks) {
        controller.enqueue(c);
      }
      controller.close();
    }
  });
  return new Response(body, init);
}

function cut(text: string, every: number): Uint8Array[] {
  const bytes = new TextEncoder().encode(text);
  const out: Uint8Array[] = [];
  for (let k = 0; k < bytes.length; k += every) {
    out.push(bytes.slice(k, k + every));
  }
  return out;
}

const LINES = [
  { session: { id: 'ses_1', title: 'Ångström survey', runs: [] } },
  { messages: [{ id: 1, run_id: 'r1', role: 'user', content: 'Where is M 31? ✓' }] },
  { messages: [{ id: 2, run_id: 'r1', role: 'assistant', content: '', tool_calls: [{ id: 'c1' }] }] },
  { events: [{ run_id: 'r1', seq: 1, time: 't', event: { type: 'text_delta', delta: 'Résolu', step: 1 } }] },
  { events: [{ run_id: 'r1', seq: 2, time: 't', event: { type: 'done', session_id: 'ses_1', run_id: 'r1', reason: 'finished' } }] }
];
const TEXT = LINES.map(l => JSON.stringify(l)).join('\n') + '\n';

describe('readJsonLines', () => {
  it('gives every line parsed, in order, however the reply is cut', async () => {
    for (const every of [1, 3, 7, 64, TEXT.length]) {
      const got: unknown[] = [];
      await readJsonLines(streamed(cut(TEXT, every)), part => got.push(part));
      expect(got).toEqual(LINES);
    }
  });

  it('takes a last line without a newline, and skips blank lines', async () => {
    const got: unknown[] = [];
    await readJsonLines(new Response('{"a":1}\n\n{"b":2}'), part => got.push(part));
    expect(got).toEqual([{ a: 1 }, { b: 2 }]);
  });
});

describe('AstroAPI.sessionHistory', () => {
  function api(reply: () => Response): AstroAPI {
    return new AstroAPI(
      ServerConnection.makeSettings({ baseUrl: 'http://lab.test/', fetch: async () => reply() } as any)
    );
  }

  it('gathers the session, the messages and the events of the lines', async () => {
    const history = await api(() => streamed(cut(TEXT, 5), { status: 200 })).sessionHistory('ses_1');
    expect(history.session.id).toBe('ses_1');
    expect(history.messages.map(m => m.id)).toEqual([1, 2]);
    expect(history.events.map(e => e.seq)).toEqual([1, 2]);
    expect((history.events[0].event as any).delta).toBe('Résolu');
  });

  it("turns the server's JSON error into an AstroAPIError", async () => {
    const reply = () => new Response(JSON.stringify({ message: 'no session', reason: 'session_not_found' }), { status: 404 });
    const error = await api(reply)
      .sessionHistory('ses_x')
      .catch(e => e);
    expect(error).toBeInstanceOf(AstroAPIError);
    expect([error.status, error.reason]).toEqual([404, 'session_not_found']);
  });

  it('refuses a reply without the session (cut short before its first line)', async () => {
    const error = await api(() => new Response('', { status: 200 }))
      .sessionHistory('ses_1')
      .catch(e => e);
    expect(error).toBeInstanceOf(AstroAPIError);
    expect(error.reason).toBe('bad_reply');
  });
});

describe('nextTask', () => {
  it('resolves in a later task, after work queued before it (not in a microtask)', async () => {
    const order: string[] = [];
    const channel = new MessageChannel();
    channel.port1.onmessage = () => order.push('queued before');
    channel.port2.postMessage(null);
    const p = nextTask().then(() => order.push('next'));
    await Promise.resolve();
    order.push('microtasks done');
    await p;
    channel.port1.close();
    expect(order).toEqual(['microtasks done', 'queued before', 'next']);
  });
});
