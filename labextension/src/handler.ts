/**
 * One way to talk to the astro server extension: `requestAPI<T>` throws `AstroAPIError`
 * carrying the server's `{message, reason}`; `AstroAPI` names each route of the contract.
 *
 * ServerConnection adds the token / XSRF headers Jupyter requires, so every call (and the
 * SSE stream, see sse.ts) goes through `ServerConnection.makeRequest`.
 */
import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

import {
  IMessagesReply,
  IModelsReply,
  IPaper,
  ISearchHit,
  ISearchReply,
  ISession,
  ISessionEventsReply,
  ISessionPatch,
  ISessionsReply,
  IStartRunReply,
  IStartRunRequest,
  IStoredEvent,
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
  let data: any = null;
  if (text.length > 0) {
    try {
      data = JSON.parse(text);
    } catch {
      data = text;
    }
  }
  if (!response.ok) {
    const message =
      (data && typeof data === 'object' && typeof data.message === 'string' && data.message) ||
      `${response.status} ${response.statusText}`;
    const reason = (data && typeof data === 'object' && typeof data.reason === 'string' && data.reason) || 'http_error';
    throw new AstroAPIError(response.status, reason, message);
  }
  return data as T;
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

  async messages(id: string): Promise<IMessagesReply> {
    return this.call(`api/sessions/${enc(id)}/messages`);
  }

  /** Every stored event of the session's runs (all pages; text deltas come folded by the server). */
  async sessionEvents(id: string): Promise<IStoredEvent[]> {
    const events: IStoredEvent[] = [];
    let cursor: string | null = null;
    do {
      const params = new URLSearchParams(cursor ? { cursor } : {});
      const query = cursor ? `?${params.toString()}` : '';
      const reply: ISessionEventsReply = await this.call(`api/sessions/${enc(id)}/events${query}`);
      for (const e of reply.events) {
        events.push(e);
      }
      cursor = reply.next_cursor;
    } while (cursor);
    return events;
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
