/**
 * A tiny fake SSE server for the client: each call of `request` is one "connection" whose
 * body is a ReadableStream the test writes to, drops, or ends. Real fetch `Response`s.
 */
export interface IFakeConnection {
  url: string;
  headers: Record<string, string>;
  signal: AbortSignal | null;
  write(text: string): void;
  /** End the body cleanly (server closed the connection). */
  end(): void;
  /** Fail the body mid-stream (network error). */
  fail(): void;
}

export class FakeEventServer {
  connections: IFakeConnection[] = [];
  /** Statuses to answer before streaming (e.g. [503, 404]); consumed one per request. */
  statuses: number[] = [];
  private waiters: Array<(c: IFakeConnection) => void> = [];

  request = async (url: string, init: RequestInit): Promise<Response> => {
    const headers: Record<string, string> = {};
    new Headers(init.headers ?? {}).forEach((v, k) => (headers[k.toLowerCase()] = v));
    const status = this.statuses.shift();
    if (status !== undefined && status !== 200) {
      this.connections.push({ url, headers, signal: init.signal ?? null, write() {}, end() {}, fail() {} });
      return new Response(JSON.stringify({ message: `status ${status}`, reason: 'x' }), { status });
    }
    let controller!: ReadableStreamDefaultController<Uint8Array>;
    const encoder = new TextEncoder();
    let closed = false;
    const body = new ReadableStream<Uint8Array>({
      start(c) {
        controller = c;
      }
    });
    const conn: IFakeConnection = {
      url,
      headers,
      signal: init.signal ?? null,
      write: (text: string) => {
        if (!closed) {
          controller.enqueue(encoder.encode(text));
        }
      },
      end: () => {
        if (!closed) {
          closed = true;
          controller.close();
        }
      },
      fail: () => {
        if (!closed) {
          closed = true;
          controller.error(new TypeError('network error'));
        }
      }
    };
    init.signal?.addEventListener('abort', () => conn.fail());
    this.connections.push(conn);
    const waiter = this.waiters.shift();
    waiter?.(conn);
    return new Response(body, { status: 200, headers: { 'Content-Type': 'text/event-stream' } });
  };

  /** Resolves with the n-th (0-based) streaming connection once it is open. */
  async connection(n: number): Promise<IFakeConnection> {
    for (let i = 0; i < 200; i++) {
      const streaming = this.connections.filter(c => c.headers !== undefined);
      if (streaming.length > n) {
        return streaming[n];
      }
      await new Promise(r => setTimeout(r, 5));
    }
    throw new Error(`connection ${n} never opened`);
  }
}

export const tick = (ms = 10) => new Promise(r => setTimeout(r, ms));

export async function until(cond: () => boolean, what = 'condition', timeoutMs = 2000): Promise<void> {
  const start = Date.now();
  while (!cond()) {
    if (Date.now() - start > timeoutMs) {
      throw new Error(`timed out waiting for ${what}`);
    }
    await tick(5);
  }
}

/** One SSE message as the server writes it. */
export const sse = (seq: number, data: unknown) => `id: ${seq}\ndata: ${JSON.stringify(data)}\n\n`;
