/**
 * Models with signals, apart from the widgets (the jupyterlab-git way):
 * - `RunModel`: one run at a time — start it, stream its events into a `TimelineModel`,
 *   cancel it (even before its first event), answer its questions;
 * - `SessionsModel`: the session list and which one is open.
 */
import { ISignal, Signal } from '@lumino/signaling';

import { AstroAPIError } from './handler';
import { ISSEMessage, SSEClient, SSERequest, SSEState } from './sse';
import { TimelineModel } from './timeline';
import {
  AgentEvent,
  IModelsReply,
  ISession,
  ISessionPatch,
  IStartRunReply,
  IStartRunRequest,
  PermissionAnswer
} from './tokens';

export { TimelineModel } from './timeline';
export type { TimelineItem, TimelineChange } from './timeline';

/** The parts of `AstroAPI` the models use (tests pass a fake). */
export interface IAstroBackend {
  startRun(request: IStartRunRequest): Promise<IStartRunReply>;
  cancelRun(runId: string): Promise<unknown>;
  answer(runId: string, requestId: string, answer: string): Promise<unknown>;
  eventsUrl(runId: string): string;
  listSessions(): Promise<ISession[]>;
  createSession(title?: string): Promise<ISession>;
  renameSession(id: string, title: string): Promise<ISession>;
  updateSession(id: string, patch: ISessionPatch): Promise<ISession>;
  deleteSession(id: string): Promise<void>;
  models(): Promise<IModelsReply>;
  switchModel(model: string): Promise<{ current: string }>;
}

export type RunStatus = 'idle' | 'starting' | 'running' | 'reconnecting' | 'done' | 'error';

export interface IRunModelOptions {
  api: IAstroBackend;
  timeline: TimelineModel;
  /** Performs the SSE request with Jupyter's auth headers. */
  request: SSERequest;
  /** Passed to the SSE client (tests shorten the backoff). */
  sseOptions?: { initialDelayMs?: number; maxDelayMs?: number; sleep?: (ms: number) => Promise<void> };
}

export class RunModel {
  private _runId: string | null = null;
  private _sessionId: string | null = null;
  private _status: RunStatus = 'idle';
  private _statusChanged = new Signal<this, RunStatus>(this);
  private _error = new Signal<this, string>(this);
  private sse: SSEClient | null = null;
  private cancelRequested = false;
  private _doneReason: string | null = null;
  private _started = new Signal<this, string>(this);
  private _event = new Signal<this, { runId: string; event: AgentEvent }>(this);

  constructor(private readonly options: IRunModelOptions) {
    options.timeline.finished.connect((_, info) => {
      if (info.runId === this._runId) {
        this._doneReason = info.reason;
        this.setStatus('done');
        this.sse?.close();
      }
    }, this);
  }

  get timeline(): TimelineModel {
    return this.options.timeline;
  }
  get runId(): string | null {
    return this._runId;
  }
  get sessionId(): string | null {
    return this._sessionId;
  }
  get status(): RunStatus {
    return this._status;
  }
  get doneReason(): string | null {
    return this._doneReason;
  }
  /** True from the moment a prompt is sent until `done` (the Stop button's enabled state). */
  get active(): boolean {
    return this._status === 'starting' || this._status === 'running' || this._status === 'reconnecting';
  }
  get statusChanged(): ISignal<this, RunStatus> {
    return this._statusChanged;
  }
  /** This model started a run (its id, before its first event). */
  get started(): ISignal<this, string> {
    return this._started;
  }
  /** Every new (not replayed-twice) event of the followed run, after the timeline applied it. */
  get event(): ISignal<this, { runId: string; event: AgentEvent }> {
    return this._event;
  }
  /** A human-readable failure (start refused, stream lost for good, answer rejected). */
  get error(): ISignal<this, string> {
    return this._error;
  }

  /** Send a prompt: show it at once, POST the run, then stream its events. */
  async start(request: IStartRunRequest): Promise<IStartRunReply | null> {
    if (this.active) {
      throw new Error('a run is already in progress');
    }
    this.detach();
    this.cancelRequested = false;
    this._doneReason = null;
    this.timeline.addUser(request.prompt);
    this.setStatus('starting');
    let reply: IStartRunReply;
    try {
      reply = await this.options.api.startRun(request);
    } catch (error) {
      const message = error instanceof AstroAPIError ? error.message : String(error);
      this.timeline.addNotice('error', `The run could not start: ${message}`);
      this.setStatus('error');
      this._error.emit(message);
      return null;
    }
    this._runId = reply.run_id;
    this._sessionId = reply.session_id;
    if (this.cancelRequested) {
      void this.postCancel();
    }
    this._started.emit(reply.run_id);
    this.connect(reply.run_id);
    return reply;
  }

  /** Follow an already running run (after a reload); events already applied are skipped by seq. */
  attach(runId: string, sessionId: string): void {
    this.detach();
    this._runId = runId;
    this._sessionId = sessionId;
    this._doneReason = null;
    this.cancelRequested = false;
    this.connect(runId);
  }

  /** Stop following (switching sessions); the run itself goes on on the server. */
  detach(): void {
    if (this.sse) {
      this.sse.close();
      this.sse = null;
    }
    this._runId = null;
    this._sessionId = null;
    this.setStatus('idle');
  }

  /** Stop the run; before the run id is known the cancel is sent as soon as it is. */
  async cancel(): Promise<void> {
    if (!this.active) {
      return;
    }
    this.cancelRequested = true;
    if (this._runId) {
      await this.postCancel();
    }
  }

  async answer(requestId: string, answer: PermissionAnswer | string): Promise<boolean> {
    const q = this.timeline.question(requestId);
    const runId = q?.runId || this._runId;
    if (!runId) {
      return false;
    }
    this.timeline.setAnswer(requestId, answer, { pending: true });
    try {
      await this.options.api.answer(runId, requestId, answer);
      this.timeline.setAnswer(requestId, answer);
      return true;
    } catch (error) {
      const message = error instanceof AstroAPIError ? error.message : String(error);
      this.timeline.setAnswer(requestId, null, { error: message });
      return false;
    }
  }

  dispose(): void {
    this.detach();
    Signal.clearData(this);
  }

  private async postCancel(): Promise<void> {
    if (!this._runId) {
      return;
    }
    try {
      await this.options.api.cancelRun(this._runId);
    } catch (error) {
      const message = error instanceof AstroAPIError ? error.message : String(error);
      this._error.emit(`Stop failed: ${message}`);
    }
  }

  private connect(runId: string): void {
    const lastSeq = this.timeline.lastSeqOf(runId);
    const sse = new SSEClient({
      url: this.options.api.eventsUrl(runId),
      request: this.options.request,
      lastEventId: lastSeq > 0 ? String(lastSeq) : undefined,
      isTerminal: m => m.data.includes('"type":"done"') && this.parse(m)?.type === 'done',
      ...(this.options.sseOptions ?? {})
    });
    this.sse = sse;
    sse.message.connect((_, message) => this.onMessage(runId, message), this);
    sse.stateChanged.connect((_, state) => this.onState(sse, state), this);
    sse.failed.connect((_, error) => {
      if (this.sse !== sse) {
        return;
      }
      this.timeline.addNotice('error', `Lost the run's event stream: ${error.message}`);
      this.setStatus('error');
      this._error.emit(error.message);
    }, this);
    if (this._status === 'idle') {
      this.setStatus('running');
    }
    void sse.start();
  }

  private parse(message: ISSEMessage): AgentEvent | null {
    try {
      return JSON.parse(message.data) as AgentEvent;
    } catch {
      return null;
    }
  }

  private onMessage(runId: string, message: ISSEMessage): void {
    const event = this.parse(message);
    if (!event) {
      return;
    }
    const seq = message.id !== '' && Number.isFinite(Number(message.id)) ? Number(message.id) : null;
    if (this.timeline.apply(runId, seq, event)) {
      this._event.emit({ runId, event });
    }
  }

  private onState(sse: SSEClient, state: SSEState): void {
    if (this.sse !== sse || this._status === 'done' || this._status === 'error') {
      return;
    }
    if (state === 'reconnecting') {
      this.setStatus('reconnecting');
    } else if (state === 'open' || state === 'connecting') {
      if (this._status !== 'starting' || state === 'open') {
        this.setStatus('running');
      }
    }
  }

  private setStatus(status: RunStatus): void {
    if (this._status !== status) {
      this._status = status;
      this._statusChanged.emit(status);
    }
  }
}

/** How a session is listed in the sidebar: title, the model it runs with, last activity. */
export function sessionLabel(s: ISession): string {
  const when = (s.updated_at || s.created_at || '').slice(0, 16).replace('T', ' ');
  return [s.title || 'Untitled session', s.model, when].filter(Boolean).join(' · ');
}

export class SessionsModel {
  private _sessions: ISession[] = [];
  private _currentId: string | null = null;
  private _changed = new Signal<this, void>(this);
  private _currentChanged = new Signal<this, string | null>(this);
  /** Bumped by every local change, so an older list answer does not undo it. */
  private epoch = 0;

  constructor(private readonly api: IAstroBackend) {}

  get sessions(): readonly ISession[] {
    return this._sessions;
  }
  get currentId(): string | null {
    return this._currentId;
  }
  get current(): ISession | null {
    return this._sessions.find(s => s.id === this._currentId) ?? null;
  }
  get changed(): ISignal<this, void> {
    return this._changed;
  }
  get currentChanged(): ISignal<this, string | null> {
    return this._currentChanged;
  }

  async refresh(): Promise<void> {
    // A list fetched before a local change (rename, create, delete) is stale: fetch again.
    for (let attempt = 0; attempt < 3; attempt++) {
      const epoch = this.epoch;
      const sessions = await this.api.listSessions();
      if (epoch === this.epoch) {
        this._sessions = sessions;
        this._changed.emit();
        return;
      }
    }
  }

  select(id: string | null): void {
    if (this._currentId !== id) {
      this._currentId = id;
      this._currentChanged.emit(id);
    }
  }

  /** A run created a session server-side: remember it as current without reloading its timeline. */
  adopt(id: string): void {
    this.epoch++;
    this._currentId = id;
    if (!this._sessions.some(s => s.id === id)) {
      this._sessions = [{ id, title: '' }, ...this._sessions];
    }
    this._changed.emit();
  }

  async create(title = ''): Promise<ISession> {
    this.epoch++;
    const session = await this.api.createSession(title);
    this.epoch++;
    this._sessions = [session, ...this._sessions.filter(s => s.id !== session.id)];
    this._changed.emit();
    this.select(session.id);
    return session;
  }

  async rename(id: string, title: string): Promise<void> {
    this.epoch++;
    const updated = await this.api.renameSession(id, title);
    this.epoch++;
    this._sessions = this._sessions.map(s => (s.id === id ? { ...s, ...updated } : s));
    this._changed.emit();
  }

  /** Store the session's coordinator mode on the server; the list takes the server's answer. */
  async setCoordinator(id: string, coordinator: boolean): Promise<ISession> {
    this.epoch++;
    const updated = await this.api.updateSession(id, { coordinator });
    this.epoch++;
    this._sessions = this._sessions.map(s => (s.id === id ? { ...s, ...updated } : s));
    this._changed.emit();
    return updated;
  }

  async remove(id: string): Promise<void> {
    this.epoch++;
    await this.api.deleteSession(id);
    this.epoch++;
    this._sessions = this._sessions.filter(s => s.id !== id);
    this._changed.emit();
    if (this._currentId === id) {
      this.select(null);
    }
  }
}
