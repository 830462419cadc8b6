/*
 * GENERATED FILE, DO NOT EDIT.
 * Derived from astro_jupyter/events.py by scripts/gen_event_types.py; regenerate with
 *   python scripts/gen_event_types.py
 * (tests/test_wire_contract.py fails when this file and the dataclasses differ).
 */

export type DoneReason = 'finished' | 'cancelled' | 'max_steps' | 'error';

export type TodoStatus = 'pending' | 'in_progress' | 'completed';

/** What a running tool reported (the executor's progress callback): done of total, and a line of text. */
export interface IProgressInfo {
  done: number | null;
  total: number | null;
  message: string;
}

/** One task of the model's plan, as `todo_write` validated it. */
export interface ITodo {
  id: string;
  content: string;
  status: TodoStatus;
  blocked_by: string[];
}

export interface ISessionEvent {
  type: 'session';
  subagent_id?: string | null;
  session_id: string;
  run_id: string;
  title?: string;
  model?: string;
}

export interface ITextDeltaEvent {
  type: 'text_delta';
  subagent_id?: string | null;
  delta: string;
  step: number;
}

export interface IThinkingDeltaEvent {
  type: 'thinking_delta';
  subagent_id?: string | null;
  delta: string;
  step: number;
}

export interface IToolCallEvent {
  type: 'tool_call';
  subagent_id?: string | null;
  id: string;
  name: string;
  arguments: unknown;
  step: number;
}

/** The model is still writing a tool call: its name arrived, `chars` of arguments so far. A long call from a slow local model otherwise shows nothing until all of it has arrived. */
export interface IToolCallPreparingEvent {
  type: 'tool_call_preparing';
  subagent_id?: string | null;
  index: number;
  name: string;
  chars: number;
  step: number;
}

export interface IToolProgressEvent {
  type: 'tool_progress';
  subagent_id?: string | null;
  id: string;
  progress: IProgressInfo;
}

export interface IToolResultEvent {
  type: 'tool_result';
  subagent_id?: string | null;
  tool_call_id: string;
  name: string;
  output: string;
  is_error?: boolean;
  metadata?: Record<string, unknown>;
  step?: number;
  duration_ms?: number;
}

export interface IAskUserEvent {
  type: 'ask_user';
  subagent_id?: string | null;
  request_id: string;
  question: string;
  options?: string[];
  timeout_secs?: number;
}

export interface IPermissionRequestEvent {
  type: 'permission_request';
  subagent_id?: string | null;
  request_id: string;
  tool_call_id: string;
  name: string;
  arguments: unknown;
  message?: string;
  scope?: string;
  code?: string;
  old_source?: string | null;
}

/** An `ask_user` or `permission_request` got its answer. Every open view of the run closes the question, and a reopened session shows what was answered, not "expired". */
export interface IQuestionAnsweredEvent {
  type: 'question_answered';
  subagent_id?: string | null;
  request_id: string;
  answer: string;
}

/** Asks the attached sidebar to read/edit/run a notebook through its open document (docs/notebook-bridge.md); answered on the answers route with a JSON object. */
export interface INotebookRequestEvent {
  type: 'notebook_request';
  subagent_id?: string | null;
  request_id: string;
  tool_call_id: string;
  action: 'read' | 'edit' | 'run';
  path: string;
  arguments?: Record<string, unknown>;
  timeout_secs?: number;
}

export interface ICompactionEvent {
  type: 'compaction';
  subagent_id?: string | null;
  layer: 'micro' | 'auto' | 'manual';
  tokens_before?: number;
  tokens_after?: number;
  message?: string;
}

/** The answer stopped at the output bound (`finish_reason: "length"`), not because it was done; `tool_name` is set when the cut fell inside that call's arguments (the call was not run). */
export interface ITruncatedEvent {
  type: 'truncated';
  subagent_id?: string | null;
  step: number;
  max_tokens?: number;
  tool_name?: string;
  message?: string;
}

/** Wire keys are `from` / `to` (Python keywords), hence the field renames. */
export interface IModelSwitchEvent {
  type: 'model_switch';
  subagent_id?: string | null;
  from: string;
  to: string;
  reason?: string;
}

export interface ISubagentEvent {
  type: 'subagent';
  subagent_id?: string | null;
  id: string;
  phase: 'start' | 'stop';
  task?: string;
  parent_tool_call_id?: string;
  summary?: string;
  is_error?: boolean;
}

export interface ITodoUpdateEvent {
  type: 'todo_update';
  subagent_id?: string | null;
  todos: ITodo[];
}

export interface IErrorEvent {
  type: 'error';
  subagent_id?: string | null;
  message: string;
  reason?: string;
  step?: number | null;
}

/** What a run cost and how full the model's context is, sent once before `done` (stored, so a reopened session shows the same figures). `cost_usd` is None when `llm_prices` has no price for the model; the context figures are 0 when unknown (no call completed). */
export interface IUsageEvent {
  type: 'usage';
  subagent_id?: string | null;
  model?: string;
  prompt_tokens?: number;
  completion_tokens?: number;
  cost_usd?: number | null;
  context_tokens?: number;
  context_window?: number;
  compact_at?: number;
}

export interface IDoneEvent {
  type: 'done';
  subagent_id?: string | null;
  session_id: string;
  run_id: string;
  reason?: DoneReason;
}

/** Every event of a run, discriminated by `type`. */
export type AgentEvent =
  | ISessionEvent
  | ITextDeltaEvent
  | IThinkingDeltaEvent
  | IToolCallEvent
  | IToolCallPreparingEvent
  | IToolProgressEvent
  | IToolResultEvent
  | IAskUserEvent
  | IPermissionRequestEvent
  | IQuestionAnsweredEvent
  | INotebookRequestEvent
  | ICompactionEvent
  | ITruncatedEvent
  | IModelSwitchEvent
  | ISubagentEvent
  | ITodoUpdateEvent
  | IErrorEvent
  | IUsageEvent
  | IDoneEvent;

export type EventType = AgentEvent['type'];

/** The `type` of every event, in the order events.py declares them. */
export const EVENT_TYPES: readonly EventType[] = [
  'session',
  'text_delta',
  'thinking_delta',
  'tool_call',
  'tool_call_preparing',
  'tool_progress',
  'tool_result',
  'ask_user',
  'permission_request',
  'question_answered',
  'notebook_request',
  'compaction',
  'truncated',
  'model_switch',
  'subagent',
  'todo_update',
  'error',
  'usage',
  'done'
];
