/**
 * The REST + SSE contract of the astro server extension, as TypeScript types.
 *
 * Event shapes come from events.generated.ts (derived from astro_jupyter/events.py); every SSE
 * message carries `id: <seq>` and `data: <json of one event>`. The REST payloads below follow
 * the OpenAPI document served at `astro/api/openapi.json`.
 */

/*
 * The event types are generated from astro_jupyter/events.py (scripts/gen_event_types.py):
 * never declare an event shape here, change the dataclass and regenerate.
 */
import { AgentEvent } from './events.generated';

export * from './events.generated';

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
  /** `GET sessions/{id}`: the sum of its runs' `usage` events. */
  usage?: ISessionUsage;
}

/** A session's tokens and cost; `cost_usd` sums the priced runs (null when none had a price). */
export interface ISessionUsage {
  runs: number;
  prompt_tokens: number;
  completion_tokens: number;
  cost_usd: number | null;
  unpriced_runs: number;
}

export interface ISessionsReply {
  sessions: ISession[];
}

export interface IStoredToolCall {
  id: string;
  type?: string;
  /** Absent in the brief messages of `GET sessions/{id}/history` (the replayed tool_call event has it). */
  function?: { name: string; arguments: string };
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

/** What `GET astro/api/sessions/{id}/history` gives, its parts gathered (messages in brief form). */
export interface ISessionHistory {
  session: ISession;
  messages: IStoredMessage[];
  events: IStoredEvent[];
}

/** One stored event of a session's run (`GET astro/api/sessions/{id}/history` or `/events`); text deltas folded. */
export interface IStoredEvent {
  run_id: string;
  seq: number;
  /** When it was stored (ISO 8601, UTC). */
  time: string;
  event: AgentEvent;
}

/** A history-search hit; `snippet` marks matched terms with « and », `snippet_html` with `<mark>`. */
export interface ISearchHit {
  session_id: string;
  session_title: string;
  message_id: number | null;
  role: string;
  snippet: string;
  snippet_html: string;
  rank?: number;
  created_at?: string;
}

/** The reply of `GET astro/api/search/history`; `next_cursor` passed back as `cursor` pages on. */
export interface ISearchReply {
  query: string;
  session_id: string | null;
  results: ISearchHit[];
  next_cursor: string | null;
  window: number;
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

/** A library paper as ``GET astro/api/papers`` lists it (the fields the sidebar shows). */
export interface IPaper {
  id: string;
  title: string;
  state: 'metadata' | 'downloaded' | 'parsed' | string;
  year?: number | null;
  authors?: string[];
}
