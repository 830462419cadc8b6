/**
 * An SSE client over fetch + ReadableStream.
 *
 * Why not EventSource: it cannot send the Authorization / XSRF headers Jupyter needs, and it
 * hides its reconnection state. This client sends `Last-Event-ID` on every reconnect, backs
 * off exponentially, exposes a "reconnecting" state the UI shows, and drops any message whose
 * numeric id is not above the last one seen (a replay overlapping what was already delivered).
 */
import { ISignal, Signal } from '@lumino/signaling';

export type SSEState = 'idle' | 'connecting' | 'open' | 'reconnecting' | 'closed';

export interface ISSEMessage {
  /** The `id:` of the message ('' when it had none). */
  id: string;
  event: string;
  data: string;
}

/** What `request` must do: perform the HTTP request (with auth headers) and return the Response. */
export type SSERequest = (url: string, init: RequestInit) => Promise<Response>;

export interface ISSEOptions {
  url: string;
  request: SSERequest;
  /** Resume after this id (sent as `Last-Event-ID` on the first connection too). */
  lastEventId?: string;
  /** First retry delay, doubled each failed attempt up to `maxDelayMs`. */
  initialDelayMs?: number;
  maxDelayMs?: number;
  /** Give up after this many consecutive failed attempts (default: never). */
  maxAttempts?: number;
  /** A message after which the stream is complete (e.g. the run's `done`): no reconnect. */
  isTerminal?: (message: ISSEMessage) => boolean;
  /** Wait function (tests pass a fast one). */
  sleep?: (ms: number) => Promise<void>;
}

/** A failure that retrying cannot fix (4xx other than 408/429). */
export class SSEFatalError extends Error {
  constructor(readonly status: number, message: string) {
    super(message);
    this.name = 'SSEFatalError';
  }
}

const defaultSleep = (ms: number) => new Promise<void>(resolve => setTimeout(resolve, ms));

/** Incremental parser of the text/event-stream format (any chunking, \n, \r\n or \r line ends). */
export class SSEParser {
  private buffer = '';
  private data: string[] = [];
  private event = '';
  private id: string | null = null;
  private sawField = false;
  private pendingCR = false;
  lastEventId = '';

  /** Feed decoded text; returns the messages it completed. */
  push(chunk: string): ISSEMessage[] {
    const out: ISSEMessage[] = [];
    let text = chunk;
    if (this.pendingCR && text.startsWith('\n')) {
      text = text.slice(1);
    }
    this.pendingCR = false;
    // Only the new text can hold a line end: a 1 MB `data:` line arriving in many chunks is
    // scanned once, not once per chunk.
    let i = this.buffer.length;
    this.buffer += text;
    let start = 0;
    for (; i < this.buffer.length; i++) {
      const c = this.buffer.charCodeAt(i);
      if (c !== 10 && c !== 13) {
        continue;
      }
      const line = this.buffer.slice(start, i);
      if (c === 13) {
        if (i + 1 < this.buffer.length) {
          if (this.buffer.charCodeAt(i + 1) === 10) {
            i++;
          }
        } else {
          this.pendingCR = true;
        }
      }
      start = i + 1;
      const message = this.line(line);
      if (message) {
        out.push(message);
      }
    }
    this.buffer = this.buffer.slice(start);
    return out;
  }

  /** Forget a half-received message (the connection it came on is gone). */
  reset(): void {
    this.buffer = '';
    this.data = [];
    this.event = '';
    this.id = null;
    this.sawField = false;
    this.pendingCR = false;
  }

  private line(line: string): ISSEMessage | null {
    if (line === '') {
      return this.dispatch();
    }
    if (line.startsWith(':')) {
      return null;
    }
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) {
      value = value.slice(1);
    }
    this.sawField = true;
    if (field === 'data') {
      this.data.push(value);
    } else if (field === 'event') {
      this.event = value;
    } else if (field === 'id' && !value.includes('\0')) {
      this.id = value;
      this.lastEventId = value;
    }
    return null;
  }

  private dispatch(): ISSEMessage | null {
    const had = this.sawField && this.data.length > 0;
    const message: ISSEMessage = {
      id: this.id ?? '',
      event: this.event || 'message',
      data: this.data.join('\n')
    };
    this.data = [];
    this.event = '';
    this.id = null;
    this.sawField = false;
    return had ? message : null;
  }
}

export class SSEClient {
  private _state: SSEState = 'idle';
  private _stateChanged = new Signal<this, SSEState>(this);
  private _message = new Signal<this, ISSEMessage>(this);
  private _failed = new Signal<this, Error>(this);
  private controller: AbortController | null = null;
  private stopped = false;
  private lastNumericId = -Infinity;
  private _lastEventId: string;
  private _attempts = 0;
  private _connections = 0;
  private loop: Promise<void> | null = null;

  constructor(private readonly options: ISSEOptions) {
    this._lastEventId = options.lastEventId ?? '';
    const n = Number(this._lastEventId);
    if (this._lastEventId !== '' && Number.isFinite(n)) {
      this.lastNumericId = n;
    }
  }

  get state(): SSEState {
    return this._state;
  }
  get stateChanged(): ISignal<this, SSEState> {
    return this._stateChanged;
  }
  /** Each new message, once, in order. */
  get message(): ISignal<this, ISSEMessage> {
    return this._message;
  }
  /** Emitted once when the client gives up (fatal status or `maxAttempts`). */
  get failed(): ISignal<this, Error> {
    return this._failed;
  }
  get lastEventId(): string {
    return this._lastEventId;
  }
  /** How many HTTP connections were opened (for tests and diagnostics). */
  get connections(): number {
    return this._connections;
  }

  /** Start streaming; resolves when the stream is complete, closed, or given up. */
  start(): Promise<void> {
    if (!this.loop) {
      this.stopped = false;
      this.loop = this.run();
    }
    return this.loop;
  }

  /** Stop for good (aborts the open request). */
  close(): void {
    this.stopped = true;
    this.controller?.abort();
    this.setState('closed');
  }

  /** Drop the current connection as if the network failed; the client reconnects (tests, "retry now"). */
  interrupt(): void {
    this.controller?.abort();
  }

  private setState(state: SSEState): void {
    if (this._state !== state) {
      this._state = state;
      this._stateChanged.emit(state);
    }
  }

  private delay(attempt: number): number {
    const initial = this.options.initialDelayMs ?? 500;
    const max = this.options.maxDelayMs ?? 10000;
    return Math.min(max, initial * Math.pow(2, Math.max(0, attempt - 1)));
  }

  private async run(): Promise<void> {
    const sleep = this.options.sleep ?? defaultSleep;
    const maxAttempts = this.options.maxAttempts ?? Infinity;
    let complete = false;
    while (!this.stopped && !complete) {
      if (this._attempts > 0) {
        if (this._attempts > maxAttempts) {
          this.giveUp(new Error(`the event stream could not be reopened after ${maxAttempts} attempts`));
          return;
        }
        this.setState('reconnecting');
        await sleep(this.delay(this._attempts));
        if (this.stopped) {
          break;
        }
      } else {
        this.setState('connecting');
      }
      try {
        complete = await this.connectOnce();
        if (!complete) {
          this._attempts++;
        }
      } catch (error) {
        if (this.stopped) {
          break;
        }
        if (error instanceof SSEFatalError) {
          this.giveUp(error);
          return;
        }
        this._attempts++;
      }
    }
    this.stopped = true;
    this.setState('closed');
  }

  private giveUp(error: Error): void {
    this.stopped = true;
    this.setState('closed');
    this._failed.emit(error);
  }

  /** One connection; true when a terminal message arrived. */
  private async connectOnce(): Promise<boolean> {
    const controller = new AbortController();
    this.controller = controller;
    const headers: Record<string, string> = { Accept: 'text/event-stream', 'Cache-Control': 'no-cache' };
    if (this._lastEventId !== '') {
      headers['Last-Event-ID'] = this._lastEventId;
    }
    this._connections++;
    const response = await this.options.request(this.options.url, {
      method: 'GET',
      headers,
      signal: controller.signal,
      cache: 'no-store'
    });
    if (!response.ok) {
      const retryable = response.status >= 500 || response.status === 408 || response.status === 429;
      let message = `${response.status} ${response.statusText}`;
      try {
        const body = await response.json();
        if (body && typeof body.message === 'string') {
          message = body.message;
        }
      } catch {
        // not JSON: keep the status line
      }
      if (!retryable) {
        throw new SSEFatalError(response.status, message);
      }
      throw new Error(message);
    }
    if (!response.body) {
      throw new Error('the event stream has no body');
    }
    this.setState('open');
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    const parser = new SSEParser();
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) {
          return false;
        }
        for (const message of parser.push(decoder.decode(value, { stream: true }))) {
          if (this.deliver(message)) {
            this.stopped = true;
            controller.abort();
            return true;
          }
          if (this.stopped) {
            return true;
          }
        }
      }
    } finally {
      reader.releaseLock?.();
    }
  }

  /** Emit unless it is a replayed duplicate; true when it was terminal. */
  private deliver(message: ISSEMessage): boolean {
    if (message.id !== '') {
      const n = Number(message.id);
      if (Number.isFinite(n)) {
        if (n <= this.lastNumericId) {
          return false;
        }
        this.lastNumericId = n;
      }
      this._lastEventId = message.id;
    }
    this._attempts = 0;
    this._message.emit(message);
    return this.options.isTerminal?.(message) ?? false;
  }
}
