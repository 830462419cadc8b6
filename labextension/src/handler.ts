/**
 * One way to talk to the astro server extension: `requestAPI<T>` throws `AstroAPIError`
 * carrying the server's `{message, reason}`; `AstroAPI` names each route of the contract.
 *
 * ServerConnection adds the token / XSRF headers Jupyter requires, so every call (and the
 * SSE stream, see sse.ts) goes through `ServerConnection.makeRequest`.
 */
import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

import { nextTask, SLICE_MS } from './tasks';

import {
  IModelsReply,
  IPaper,
  ISearchHit,
  ISearchReply,
  ISession,
  ISessionHistory,
  ISessionPatch,
  ISessionsReply,
  IStartRunReply,
  IStartRunRequest,
  IStoredEvent,
  IStoredMessage,
  PermissionAnswer
} from './tokens';

export const API_NAMESPACE = 'astro';

/** An HTTP error from the astro routes (or a network failure, status 0). */
export class AstroAPIError extends Error {
  readonly status: number;
  readonly reason: string;

  constructor(status: number, reason: string, message: string) {
    super(message);
    this.name = 'AstroAPIError';
    this.status = status;
    this.reason = reason;
  }
}

export function apiUrl(endPoint: string, settings?: ServerConnection.ISettings): string {
  const s = settings ?? ServerConnection.makeSettings();
  return URLExt.join(s.baseUrl, API_NAMESPACE, endPoint);
}

/** Call `{base}/astro/{endPoint}`; JSON in and out; non-2xx becomes `AstroAPIError`. */
export async function requestAPI<T>(
  endPoint = '',
  init: RequestInit = {},
  settings?: ServerConnection.ISettings
): Promise<T> {
  const s = settings ?? ServerConnection.makeSettings();
  const url = apiUrl(endPoint, s);
  const headers = new Headers(init.headers ?? {});
  if (init.body !== undefined && !headers.has('Content-Type')) {
    headers.set('Content-Type', 'application/json');
  }
  let response: Response;
  try {
    response = await ServerConnection.makeRequest(url, { ...init, headers }, s);
  } catch (error) {
    throw new AstroAPIError(0, 'network_error', `The Jupyter server is unreachable: ${String(error)}`);
  }
  const text = await response.text();
  const data = parseReply(text);
  if (!response.ok) {
    throw errorOf(response, data);
  }
  return data as T;
}

function parseReply(text: string): any {
  if (text.length === 0) {
    return null;
  }
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/** The `AstroAPIError` of a non-2xx reply (`data`: its parsed body, `{message, reason}`). */
function errorOf(response: Response, data: any): AstroAPIError {
  const message =
    (data && typeof data === 'object' && typeof data.message === 'string' && data.message) ||
    `${response.status} ${response.statusText}`;
  const reason = (data && typeof data === 'object' && typeof data.reason === 'string' && data.reason) || 'http_error';
  return new AstroAPIError(response.status, reason, message);
}

/**
 * Call `each` with every line of a reply of JSON lines, parsed, as the lines arrive, giving the
 * browser its turn (`nextTask`) after each `SLICE_MS` of parsing: a reply of megabytes would be
 * one long main-thread task if parsed at once.
 */
export async function readJsonLines(response: Response, each: (part: any) => void): Promise<void> {
  let start = performance.now();
  const take = async (lines: string[]): Promise<void> => {
    for (const line of lines) {
      if (line.trim()) {
        each(JSON.parse(line));
      }
      if (performance.now() - start >= SLICE_MS) {
        await nextTask();
        start = performance.now();
      }
    }
  };
  const reader = response.body?.getReader();
  if (!reader) {
    await take((await response.text()).split('\n'));
    return;
  }
  const decoder = new TextDecoder();
  let rest = '';
  for (;;) {
    const { done, value } = await reader.read();
    rest += done ? decoder.decode() : decoder.decode(value, { stream: true });
    const lines = rest.split('\n');
    rest = done ? '' : lines.pop() ?? '';
    await take(lines);
    if (done) {
      return;
    }
  }
}

function json(method: string, body?: unknown): RequestInit {
  return body === undefined ? { method } : { method, body: JSON.stringify(body) };
}

const enc = encodeURIComponent;

/** The routes of the contract, typed. One instance per panel. */
export class AstroAPI {
  constructor(readonly settings: ServerConnection.ISettings = ServerConnection.makeSettings()) {}

  private call<T>(endPoint: string, init: RequestInit = {}): Promise<T> {
    return requestAPI<T>(endPoint, init, this.settings);
  }

  startRun(request: IStartRunRequest): Promise<IStartRunReply> {
    return this.call('api/runs', json('POST', request));
  }

  cancelRun(runId: string): Promise<{ run_id: string; status: string }> {
    return this.call(`api/runs/${enc(runId)}/cancel`, json('POST', {}));
  }

  answer(runId: string, requestId: string, answer: PermissionAnswer | string | Record<string, unknown>): Promise<unknown> {
    return this.call(`api/runs/${enc(runId)}/answers`, json('POST', { request_id: requestId, answer }));
  }

  eventsUrl(runId: string): string {
    return apiUrl(`api/runs/${enc(runId)}/events`, this.settings);
  }

  async listSessions(): Promise<ISession[]> {
    return (await this.call<ISessionsReply>('api/sessions')).sessions;
  }

  createSession(title = ''): Promise<ISession> {
    return this.call('api/sessions', json('POST', { title }));
  }

  /** The demo's recorded session for this user (the server imports it on first ask; no LLM needed). */
  demoSession(): Promise<ISession> {
    return this.call('api/sessions/demo', { method: 'POST' });
  }

  getSession(id: string): Promise<ISession> {
    return this.call(`api/sessions/${enc(id)}`);
  }

  renameSession(id: string, title: string): Promise<ISession> {
    return this.updateSession(id, { title });
  }

  /** PATCH a session's title and/or coordinator mode (stored server-side, so every tab agrees). */
  updateSession(id: string, patch: ISessionPatch): Promise<ISession> {
    return this.call(`api/sessions/${enc(id)}`, json('PATCH', patch));
  }

  deleteSession(id: string): Promise<void> {
    return this.call(`api/sessions/${enc(id)}`, { method: 'DELETE' });
  }

  /**
   * What a reopened session is rebuilt from, in one request (`GET sessions/{id}/history`): the
   * session, its messages (brief: no tool output) and every stored event of its runs (text
   * deltas folded by the server), read and parsed a part at a time as they arrive.
   */
  async sessionHistory(id: string): Promise<ISessionHistory> {
    const url = apiUrl(`api/sessions/${enc(id)}/history`, this.settings);
    let response: Response;
    try {
      response = await ServerConnection.makeRequest(url, {}, this.settings);
    } catch (error) {
      throw new AstroAPIError(0, 'network_error', `The Jupyter server is unreachable: ${String(error)}`);
    }
    if (!response.ok) {
      throw errorOf(response, parseReply(await response.text()));
    }
    let session: ISession | null = null;
    const messages: IStoredMessage[] = [];
    const events: IStoredEvent[] = [];
    try {
      await readJsonLines(response, part => {
        if (part.session) {
          session = part.session;
        }
        for (const m of part.messages ?? []) {
          messages.push(m);
        }
        for (const e of part.events ?? []) {
          events.push(e);
        }
      });
    } catch (error) {
      throw new AstroAPIError(0, 'network_error', `The session's history did not arrive whole: ${String(error)}`);
    }
    if (session === null) {
      throw new AstroAPIError(response.status, 'bad_reply', "The session's history came without the session");
    }
    return { session, messages, events };
  }

  /** The session as notebook JSON (the export route answers an .ipynb document). */
  exportSession(id: string): Promise<any> {
    return this.call(`api/sessions/${enc(id)}/export`);
  }

  async searchHistory(q: string, sessionId?: string): Promise<ISearchHit[]> {
    const params = new URLSearchParams({ q });
    if (sessionId) {
      params.set('session_id', sessionId);
    }
    return (await this.call<ISearchReply>(`api/search/history?${params.toString()}`)).results;
  }

  models(): Promise<IModelsReply> {
    return this.call('api/models');
  }

  switchModel(model: string): Promise<{ current: string; previous?: string }> {
    return this.call('api/models/current', json('PUT', { model }));
  }

  async listPapers(): Promise<IPaper[]> {
    return (await this.call<{ papers: IPaper[] }>('api/papers')).papers;
  }

  /** Take a paper out of the library (its passages, PDF copy and Markdown; notes stay). */
  removePaper(id: string): Promise<{ removed: string; chunks: number }> {
    return this.call(`api/papers/${enc(id)}`, { method: 'DELETE' });
  }

  bookmarkletUrl(): string {
    return URLExt.join(this.settings.baseUrl, API_NAMESPACE, 'bookmarklet');
  }
}
