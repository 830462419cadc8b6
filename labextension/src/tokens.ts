/**
 * The REST + SSE contract of the astro server extension, as TypeScript types.
 *
 * Wire shapes follow ARCHITECTURE.md ("One run, as data") and astro_jupyter/events.py:
 * every SSE message carries `id: <seq>` and `data: <json of one event>`.
 */

/** Fields every event may carry: events emitted inside a subagent are tagged with its id. */
export interface IEventBase {
  type: string;
  subagent_id?: string | null;
}

export interface ISessionEvent extends IEventBase {
  type: 'session';
  session_id: string;
  run_id: string;
  title?: string;
  model?: string;
}

export interface ITextDeltaEvent extends IEventBase {
  type: 'text_delta' | 'thinking_delta';
  delta: string;
  step: number;
}

export interface IToolCallEvent extends IEventBase {
  type: 'tool_call';
  id: string;
  name: string;
  arguments: unknown;
  step: number;
}

export interface IToolProgress {
  done?: number;
  total?: number;
  message?: string;
}

export interface IToolProgressEvent extends IEventBase {
  type: 'tool_progress';
  id: string;
  progress: IToolProgress;
}

export interface IToolResultEvent extends IEventBase {
  type: 'tool_result';
  tool_call_id: string;
  name: string;
  output: string;
  is_error?: boolean;
  metadata?: { persisted_path?: string; [key: string]: unknown };
  step?: number;
  duration_ms?: number;
}

export interface IAskUserEvent extends IEventBase {
  type: 'ask_user';
  request_id: string;
  question: string;
  options?: string[];
  timeout_secs?: number;
}

export interface IPermissionRequestEvent extends IEventBase {
  type: 'permission_request';
  request_id: string;
  tool_call_id: string;
  name: string;
  arguments: unknown;
  message?: string;
}

export interface ICompactionEvent extends IEventBase {
  type: 'compaction';
  layer: 'micro' | 'auto' | 'manual';
  tokens_before?: number;
  tokens_after?: number;
  message?: string;
}

export interface IModelSwitchEvent extends IEventBase {
  type: 'model_switch';
  from: string;
  to: string;
  reason?: string;
}

export interface ISubagentEvent extends IEventBase {
  type: 'subagent';
  id: string;
  phase: 'start' | 'stop';
  task?: string;
  parent_tool_call_id?: string;
  summary?: string;
  is_error?: boolean;
}

export interface ITodo {
  id?: string | number;
  content?: string;
  title?: string;
  status?: string;
  [key: string]: unknown;
}

export interface ITodoUpdateEvent extends IEventBase {
  type: 'todo_update';
  todos: ITodo[];
}

export interface IErrorEvent extends IEventBase {
  type: 'error';
  message: string;
  reason?: string;
  step?: number | null;
}

export type DoneReason = 'finished' | 'cancelled' | 'max_steps' | 'error';

export interface IDoneEvent extends IEventBase {
  type: 'done';
  session_id: string;
  run_id: string;
  reason: DoneReason;
}

export type AgentEvent =
  | ISessionEvent
  | ITextDeltaEvent
  | IToolCallEvent
  | IToolProgressEvent
  | IToolResultEvent
  | IAskUserEvent
  | IPermissionRequestEvent
  | ICompactionEvent
  | IModelSwitchEvent
  | ISubagentEvent
  | ITodoUpdateEvent
  | IErrorEvent
  | IDoneEvent;

/* ---------------------------------------------------------------- REST payloads */

/** The active notebook a run is about (docs/notebook-bridge.md). */
export interface INotebookContext {
  /** Absent when no notebook is active or the user dropped the chip (bridge only). */
  path?: string;
  cell_ids?: string[];
  bridge?: boolean;
}

export interface IStartRunRequest {
  prompt: string;
  session_id?: string;
  model?: string;
  coordinator?: boolean;
  max_steps?: number;
  notebook?: INotebookContext;
}

export interface IStartRunReply {
  run_id: string;
  session_id: string;
}

export interface IRunRecord {
  id: string;
  session_id: string;
  status: string;
  prompt?: string;
  model?: string;
  started_at?: string;
  finished_at?: string | null;
}

/** The body of `PATCH astro/api/sessions/{id}` (at least one field). */
export interface ISessionPatch {
  title?: string;
  coordinator?: boolean;
}

export interface ISession {
  id: string;
  title: string;
  summary?: string;
  owner?: string;
  model?: string;
  coordinator?: boolean;
  source?: string;
  metadata?: Record<string, unknown>;
  created_at?: string;
  updated_at?: string;
  /** How many prompts the session holds (the list's "N turns"). */
  turns?: number;
  /** The model of the session's latest run. */
  last_model?: string;
  /** The live run of this session on the server, if any (a reload reattaches to it). */
  active_run_id?: string | null;
  runs?: IRunRecord[];
}

export interface ISessionsReply {
  sessions: ISession[];
}

export interface IStoredToolCall {
  id: string;
  type?: string;
  function: { name: string; arguments: string };
}

/** One stored message, in the OpenAI chat shape plus its row id and run id. */
export interface IStoredMessage {
  id: number;
  session_id: string;
  run_id: string;
  role: 'system' | 'user' | 'assistant' | 'tool' | string;
  content: string;
  tool_calls?: IStoredToolCall[] | null;
  tool_call_id?: string | null;
  name?: string | null;
  metadata?: Record<string, unknown>;
  compacted?: boolean;
  created_at?: string;
}

export interface IMessagesReply {
  session_id: string;
  messages: IStoredMessage[];
}

/** A history-search hit; `snippet` marks matched terms with « and ». */
export interface ISearchHit {
  session_id: string;
  session_title: string;
  message_id: number | null;
  role: string;
  snippet: string;
  rank?: number;
  created_at?: string;
}

export interface IModelsReply {
  current: string;
  models: string[];
  configured?: string[];
  source?: string;
  warning?: string | null;
}

export type PermissionAnswer = 'allow' | 'deny' | 'always';

export const MARK_START = '\u00ab';
export const MARK_END = '\u00bb';
