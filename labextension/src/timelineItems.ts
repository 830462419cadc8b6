/**
 * The display items of the timeline (what TimelineModel folds events into) and the small pure
 * helpers the model and the history loader share.
 */
import { IAskUserEvent, IPermissionRequestEvent, IProgressInfo, ITodo } from './tokens';

export type ItemKind = 'user' | 'text' | 'thinking' | 'tool' | 'subagent' | 'todo' | 'notice' | 'question' | 'end';

interface IItemBase {
  /** Unique and stable: the DOM node of an item is keyed by it. */
  readonly key: string;
  readonly kind: ItemKind;
  /** Incremented on every change (the view re-renders an item whose version moved). */
  version: number;
  parent: ISubagentItem | null;
  /** The stored message this item shows (history), so a search hit can scroll to it. */
  messageId?: number;
  runId?: string;
  /** When it was said (ms since the epoch): live items now, history from `created_at`. */
  time?: number;
  /** Rebuilt from stored events (a reopened session), not streamed now. */
  replayed?: boolean;
}

export interface IUserItem extends IItemBase {
  kind: 'user';
  text: string;
}

export interface ITextItem extends IItemBase {
  kind: 'text' | 'thinking';
  text: string;
  step: number;
  streaming: boolean;
}

/**
 * `waiting`: a permission question for this call is open; `cancelled`: stopped by the user;
 * `interrupted`: the run ended (step limit, error) before its result came; `declined`: the user answered
 * Deny (a decision, not a failure).
 */
export type ToolStatus = 'running' | 'waiting' | 'done' | 'error' | 'cancelled' | 'interrupted' | 'declined';

export interface IToolResult {
  output: string;
  isError: boolean;
  metadata: Record<string, unknown>;
  durationMs: number | null;
}

export interface IToolItem extends IItemBase {
  kind: 'tool';
  id: string;
  name: string;
  arguments: unknown;
  step: number;
  /** False while only a progress/result for this id has arrived (out of order). */
  callSeen: boolean;
  progress: IProgressInfo | null;
  result: IToolResult | null;
  status: ToolStatus;
  startedAt: number;
  /** The stored `tool` message holding the result (history), for search hits on it. */
  resultMessageId?: number;
  /**
   * Consecutive identical calls (same name and arguments) or identical errors are shown as one
   * line: the first is the head and lists the others in `repeats`; each other points at it.
   */
  repeatOf: IToolItem | null;
  repeats: IToolItem[];
}

export interface ISubagentItem extends IItemBase {
  kind: 'subagent';
  id: string;
  task: string;
  parentToolCallId: string;
  phase: 'running' | 'stopped';
  summary: string;
  isError: boolean;
  children: TimelineItem[];
}

export interface ITodoItem extends IItemBase {
  kind: 'todo';
  todos: ITodo[];
  /** True while its run goes on: the list is pinned at the top of the view. */
  active: boolean;
}

/** `truncated`: the run finished but its answer stopped at the output limit. */
export type EndReason = 'cancelled' | 'max_steps' | 'error' | 'truncated';

/** What a banner's button does: the first of an end item's `actions` is the primary one. */
export type EndAction = 'retry' | 'more_steps' | 'continue' | 'switch_model' | 'new_chat';

/** How a run ended when it did not simply finish: a banner saying why, and what fits next. */
export interface IEndItem extends IItemBase {
  kind: 'end';
  reason: EndReason;
  text: string;
  hint: string;
  /** Primary first; empty when no button helps (a rejected key is fixed where the server runs). */
  actions: EndAction[];
}

export type NoticeVariant = 'compaction' | 'model_switch' | 'error' | 'done' | 'info' | 'truncated' | 'preparing' | 'usage';

export interface INoticeItem extends IItemBase {
  kind: 'notice';
  variant: NoticeVariant;
  text: string;
  /** A passing notice that is over (a tool call being written, once it arrived). */
  hidden?: boolean;
  /** An error's machine-readable `reason` (`unknown_model`, `auth`, `llm_unavailable`, …). */
  reason?: string;
}

export interface IQuestionItem extends IItemBase {
  kind: 'question';
  variant: 'ask_user' | 'permission';
  requestId: string;
  question: string;
  options: string[];
  toolName: string;
  toolCallId: string;
  arguments: unknown;
  /** The exact code that will run when it is not an argument (notebook_run: the cell, read where it runs). */
  code: string;
  /** What an edit replaces, read where it applies (notebook_edit replace): the card shows a diff. */
  oldSource: string | null;
  /** The answer given (or 'expired' when the run ended first). */
  answer: string | null;
  pending: boolean;
  error: string | null;
}

export type TimelineItem =
  | IUserItem
  | ITextItem
  | IToolItem
  | ISubagentItem
  | ITodoItem
  | INoticeItem
  | IQuestionItem
  | IEndItem;

export type TimelineChange =
  | { type: 'added'; item: TimelineItem; parent: ISubagentItem | null; before?: TimelineItem | null }
  | { type: 'updated'; item: TimelineItem }
  | { type: 'reset' };

export interface IRunInfo {
  runId: string;
  sessionId: string;
  title?: string;
  model?: string;
}

let keyCounter = 0;
/** A fresh item key (unique for the page's lifetime). */
export const nextKey = (prefix: string): string => `${prefix}-${++keyCounter}`;

export const END_TEXT: Record<EndReason, string> = {
  cancelled: 'Run stopped.',
  max_steps: 'Run stopped: the step limit was reached.',
  error: 'Run ended with an error.',
  truncated: 'The answer was cut off at the output limit.'
};

/** Identical failing calls in a row after which more steps would most likely repeat them. */
export const STUCK_REPEATS = 5;

/** What ended a run, told apart so the banner names the reason and offers what fits. */
export interface IEndCause {
  reason: EndReason;
  /** The `reason` of the run's last error event (`unknown_model`, `auth`, …), if any. */
  errorReason?: string;
  /** The longest row of identical failing calls in the run ("×20" on its tool line). */
  failedRepeats?: number;
}

/** The banner for a run's end: its text, hint and actions (primary first). */
export function endBanner(cause: IEndCause): Pick<IEndItem, 'reason' | 'text' | 'hint' | 'actions'> {
  const { reason, errorReason = '', failedRepeats = 0 } = cause;
  if (reason === 'error') {
    switch (errorReason) {
      case 'unknown_model':
        return { reason, text: 'The endpoint does not serve this model.', hint: 'Switch to a model it lists, then send again.', actions: ['switch_model'] };
      case 'auth':
        return {
          reason,
          text: 'The endpoint rejected the API key.',
          hint: 'Set OPENAI_API_KEY (the key your endpoint expects) where the Jupyter server runs and restart it; trying again will not help.',
          actions: []
        };
      case 'llm_unavailable':
        return { reason, text: 'The LLM endpoint could not be reached.', hint: 'Check that it is running (OPENAI_BASE_URL), then try again.', actions: ['retry'] };
      case 'context_overflow':
        return { reason, text: 'The conversation no longer fits the model’s context.', hint: 'Start a new chat, or switch to a model with a larger context.', actions: ['new_chat', 'switch_model'] };
      default:
        return { reason, text: END_TEXT.error, hint: 'The message above says what went wrong.', actions: ['retry'] };
    }
  }
  if (reason === 'max_steps') {
    if (failedRepeats >= STUCK_REPEATS) {
      return {
        reason,
        text: `Run stopped at the step limit after the same call failed ${failedRepeats} times in a row.`,
        hint: 'More steps would most likely repeat it: start a new chat, or try again with a more specific request.',
        actions: ['new_chat', 'retry', 'more_steps']
      };
    }
    return { reason, text: END_TEXT.max_steps, hint: 'The agent used all the steps it was given for this run.', actions: ['more_steps'] };
  }
  if (reason === 'truncated') {
    return { reason, text: END_TEXT.truncated, hint: 'Continue asks the model to go on where it stopped.', actions: ['continue'] };
  }
  return { reason, text: END_TEXT.cancelled, hint: 'You stopped the run; what it did so far is kept.', actions: ['continue'] };
}

/** The line under an answer: its tokens and what it cost (`llm_prices`), or that the cost is unknown. */
export function usageText(u: { model?: string; prompt_tokens?: number; completion_tokens?: number; cost_usd?: number | null }): string {
  const input = u.prompt_tokens ?? 0;
  const output = u.completion_tokens ?? 0;
  const tokens = `${(input + output).toLocaleString('en-US')} tokens (${input.toLocaleString('en-US')} in · ${output.toLocaleString('en-US')} out)`;
  const cost = typeof u.cost_usd === 'number' ? formatUsd(u.cost_usd) : `cost unknown (no llm_prices entry for ${u.model || 'this model'})`;
  return `${tokens} · ${cost}`;
}

/** Dollars with the digits that matter: $1.24, $0.031, $0.00036. */
export function formatUsd(cost: number): string {
  if (cost >= 1) {
    return `$${cost.toFixed(2)}`;
  }
  if (cost >= 0.01) {
    return `$${cost.toFixed(3)}`;
  }
  return cost > 0 ? `$${cost.toFixed(Math.min(10, 1 - Math.floor(Math.log10(cost))))}` : '$0';
}

/** A stored timestamp as ms since the epoch (SQLite's `YYYY-MM-DD HH:MM:SS` is UTC). */
export function parseTime(value: string | undefined | null): number | undefined {
  if (!value) {
    return undefined;
  }
  let v = value.trim();
  if (/^\d{4}-\d{2}-\d{2} \d/.test(v)) {
    v = v.replace(' ', 'T');
  }
  if (/T\d{2}:\d{2}(:\d{2}(\.\d+)?)?$/.test(v)) {
    v += 'Z';
  }
  const t = Date.parse(v);
  return Number.isFinite(t) ? t : undefined;
}

/** The identity of a call for "identical consecutive calls": name and arguments. */
/**
 * What a tool line shows for a tool name: an outside MCP server's tool (`mcp__server__tool`, see
 * astro_jupyter/agent/tools/mcp.py) as `tool · server`, so the line says which program ran it.
 */
export function toolLabel(name: string): { tool: string; server: string } {
  const match = /^mcp__([A-Za-z0-9-]+(?:_[A-Za-z0-9-]+)*)__(.+)$/.exec(name);
  return match ? { tool: match[2], server: match[1] } : { tool: name, server: '' };
}

export function callSignature(tool: IToolItem): string {
  let args: string;
  try {
    args = JSON.stringify(tool.arguments) ?? '';
  } catch {
    args = String(tool.arguments);
  }
  return `${tool.name}\u0000${args}`;
}

/**
 * A result's status: a cancelled call (metadata.cancelled) reads "cancelled", a call the user denied
 * (metadata.declined, set by the executor) "declined", not "error".
 */
export function resultStatus(result: IToolResult): ToolStatus {
  if (result.metadata?.cancelled === true) {
    return 'cancelled';
  }
  if (result.metadata?.declined === true) {
    return 'declined';
  }
  return result.isError ? 'error' : 'done';
}

/** What a question item takes from its event (the item's state is added by the model). */
export type QuestionFields = Pick<
  IQuestionItem,
  'variant' | 'requestId' | 'question' | 'options' | 'toolName' | 'toolCallId' | 'arguments' | 'code' | 'oldSource'
>;

/** An `ask_user` or `permission_request` event as the question the timeline shows. */
export function questionOf(event: IAskUserEvent | IPermissionRequestEvent): QuestionFields {
  if (event.type === 'ask_user') {
    const q = { requestId: event.request_id, question: event.question, options: event.options ?? [] };
    return { variant: 'ask_user', ...q, toolName: '', toolCallId: '', arguments: null, code: '', oldSource: null };
  }
  return {
    variant: 'permission',
    requestId: event.request_id,
    question: event.message || `Allow ${event.name}?`,
    options: [],
    toolName: event.name,
    toolCallId: event.tool_call_id,
    arguments: event.arguments,
    code: typeof event.code === 'string' ? event.code : '',
    oldSource: typeof event.old_source === 'string' ? event.old_source : null
  };
}
