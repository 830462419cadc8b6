/**
 * TimelineModel: the events of a session's runs folded into display items.
 *
 * Why a model apart from the widgets: matching `tool_result` to `tool_call` by id, nesting the
 * events of subagents, tolerating out-of-order delivery and dropping replayed duplicates (by
 * `(run_id, seq)`) are logic, tested without a DOM. The view only renders `changed` items.
 * A reopened session goes through the same `apply` (history.ts replays its stored events).
 */
import { ISignal, Signal } from '@lumino/signaling';

import { historySteps, runInSlices } from './history';
import { SLICE_MS } from './tasks';
import {
  callSignature,
  endBanner,
  EndReason,
  IEndCause,
  IEndItem,
  INoticeItem,
  IQuestionItem,
  IRunInfo,
  ISubagentItem,
  ITextItem,
  ITodoItem,
  IToolItem,
  IUserItem,
  nextKey,
  NoticeVariant,
  QuestionFields,
  questionOf,
  resultStatus,
  TimelineChange,
  TimelineItem,
  usageText
} from './timelineItems';
import { AgentEvent, ISessionUsage, IStoredEvent, IStoredMessage, ITodo, IToolResultEvent, IUsageEvent } from './tokens';

export * from './timelineItems';

/** Events after which a "preparing <tool>…" line is over (the call arrived, or the turn ended). */
const ENDS_PREPARING = new Set<string>(['tool_call', 'text_delta', 'truncated', 'error', 'done']);

export class TimelineModel {
  private _items: TimelineItem[] = [];
  private _changed = new Signal<this, TimelineChange>(this);
  private _runInfo = new Signal<this, IRunInfo>(this);
  private _finished = new Signal<this, { runId: string; reason: string }>(this);
  private _usage = new Signal<this, IUsageEvent | null>(this);
  /** Runs whose final answer stopped at the output limit (a top-level `truncated` with no call cut). */
  private cutOff = new Map<string, number>();
  /** Each run's latest `usage` (cumulative): shown under its answer once the run ends. */
  private runUsage = new Map<string, IUsageEvent>();
  private tools = new Map<string, IToolItem>();
  private subagents = new Map<string, ISubagentItem>();
  private questions = new Map<string, IQuestionItem>();
  private todos = new Map<string, ITodoItem>();
  private preparing = new Map<string, INoticeItem>();
  /** The items of each run (nested ones too), so ending a run touches only its own. */
  private byRun = new Map<string, TimelineItem[]>();
  private lastSeq = new Map<string, number>();
  private _duplicates = 0;
  /** While a history loads, item changes are not announced one by one: one 'reset' at the end. */
  private bulk = false;
  /** While stored events replay: when the event being applied happened (else items are "now"). */
  private replayAt: number | null = null;

  /** Top-level items in display order. */
  get items(): readonly TimelineItem[] {
    return this._items;
  }
  get changed(): ISignal<this, TimelineChange> {
    return this._changed;
  }
  /** A `session` event: which run/session this stream belongs to. */
  get runInfo(): ISignal<this, IRunInfo> {
    return this._runInfo;
  }
  get finished(): ISignal<this, { runId: string; reason: string }> {
    return this._finished;
  }
  /**
   * The session's total so far: each run's last (cumulative) `usage`, replayed from the stored
   * events or live, so it needs no request and cannot lag behind the server's event store.
   */
  sessionUsage(): ISessionUsage | undefined {
    if (!this.runUsage.size) {
      return undefined;
    }
    const total: ISessionUsage = { runs: 0, prompt_tokens: 0, completion_tokens: 0, cost_usd: null, unpriced_runs: 0 };
    for (const u of this.runUsage.values()) {
      total.runs++;
      total.prompt_tokens += u.prompt_tokens ?? 0;
      total.completion_tokens += u.completion_tokens ?? 0;
      if (typeof u.cost_usd === 'number') {
        total.cost_usd = (total.cost_usd ?? 0) + u.cost_usd;
      } else {
        total.unpriced_runs++;
      }
    }
    return total;
  }
  /** A run's `usage` (tokens, cost, context fill), live or replayed; null when the timeline is cleared. */
  get usage(): ISignal<this, IUsageEvent | null> {
    return this._usage;
  }
  /** How many replayed events were dropped (seq already applied). */
  get duplicates(): number {
    return this._duplicates;
  }
  lastSeqOf(runId: string): number {
    return this.lastSeq.get(runId) ?? 0;
  }
  tool(id: string): IToolItem | undefined {
    return this.tools.get(id);
  }
  subagent(id: string): ISubagentItem | undefined {
    return this.subagents.get(id);
  }
  question(requestId: string): IQuestionItem | undefined {
    return this.questions.get(requestId);
  }
  /** Every item, depth first (subagent children after their subagent). */
  *walk(items: readonly TimelineItem[] = this._items): Generator<TimelineItem> {
    for (const item of items) {
      yield item;
      if (item.kind === 'subagent') {
        yield* this.walk(item.children);
      }
    }
  }

  clear(): void {
    this.bulk = false;
    this._items = [];
    this.tools.clear();
    this.subagents.clear();
    this.questions.clear();
    this.todos.clear();
    this.preparing.clear();
    this.byRun.clear();
    this.lastSeq.clear();
    this.cutOff.clear();
    this.runUsage.clear();
    this._duplicates = 0;
    this._changed.emit({ type: 'reset' });
    this._usage.emit(null);
  }

  addUser(text: string, extra: { messageId?: number; runId?: string; time?: number } = {}): IUserItem {
    const item: IUserItem = { key: nextKey('user'), kind: 'user', version: 0, parent: null, text, time: this.now(), ...extra };
    this.add(item, null);
    return item;
  }

  addNotice(
    variant: NoticeVariant,
    text: string,
    parent: ISubagentItem | null = null,
    extra: { runId?: string; reason?: string } = {}
  ): INoticeItem {
    const item: INoticeItem = { key: nextKey('notice'), kind: 'notice', version: 0, parent, variant, text, ...extra };
    this.add(item, parent);
    return item;
  }

  /**
   * Apply one event of run `runId` with sequence number `seq` (null: no dedupe).
   * Returns false when it was a duplicate (seq not above the last applied for that run).
   */
  apply(runId: string, seq: number | null, event: AgentEvent): boolean {
    if (seq !== null) {
      if (seq <= (this.lastSeq.get(runId) ?? 0)) {
        this._duplicates++;
        return false;
      }
      this.lastSeq.set(runId, seq);
    }
    const parent = event.subagent_id ? this.ensureSubagent(event.subagent_id, runId) : null;
    if (ENDS_PREPARING.has(event.type)) {
      this.endPreparing(runId, event.subagent_id ?? null);
    }
    switch (event.type) {
      case 'session':
        this._runInfo.emit({
          runId: event.run_id,
          sessionId: event.session_id,
          title: event.title,
          model: event.model
        });
        break;
      case 'tool_call_preparing': {
        // one calm line per call being written, updated in place until the call itself arrives
        const key = `${runId}/${event.subagent_id ?? ''}`;
        const text = `Preparing ${event.name}… (${event.chars.toLocaleString()} characters so far)`;
        const line = this.preparing.get(key);
        if (line) {
          line.text = text;
          this.touch(line);
        } else {
          this.preparing.set(key, this.addNotice('preparing', text, parent));
        }
        break;
      }
      case 'truncated':
        this.addNotice('truncated', event.message || 'The answer was cut off at the output limit.', parent);
        if (!parent && !event.tool_name) {
          this.cutOff.set(runId, event.step);
        }
        break;
      case 'text_delta':
      case 'thinking_delta':
        if (!parent && event.step > (this.cutOff.get(runId) ?? Infinity)) {
          this.cutOff.delete(runId); // the model went on after the cut: the run's answer is not the cut one
        }
        this.appendText(event.type === 'text_delta' ? 'text' : 'thinking', event.delta, event.step, parent, runId);
        break;
      case 'tool_call': {
        const tool = this.ensureTool(event.id, parent, runId);
        tool.name = event.name;
        tool.arguments = event.arguments;
        tool.step = event.step;
        tool.callSeen = true;
        this.touch(tool);
        this.group(tool);
        break;
      }
      case 'tool_progress': {
        const tool = this.ensureTool(event.id, parent, runId);
        tool.progress = event.progress ?? null;
        this.touch(tool);
        break;
      }
      case 'tool_result':
        this.setResult(event, parent, runId);
        break;
      case 'ask_user':
      case 'permission_request':
        this.addQuestion(questionOf(event), parent, runId);
        if (event.type === 'permission_request') {
          this.setWaiting(event.tool_call_id, true);
        }
        break;
      case 'question_answered': {
        // answered here, in another tab, or (on reload) before: the question shows what was answered
        const q = this.questions.get(event.request_id);
        if (q && (q.answer === null || q.pending || q.answer === 'expired')) {
          this.setAnswer(event.request_id, event.answer);
        }
        break;
      }
      case 'compaction': {
        const saved =
          event.tokens_before && event.tokens_after
            ? ` (${event.tokens_before.toLocaleString()} → ${event.tokens_after.toLocaleString()} tokens)`
            : '';
        this.addNotice('compaction', `Context compacted: ${event.layer}${saved}${event.message ? ' — ' + event.message : ''}`, parent);
        break;
      }
      case 'model_switch':
        this.addNotice('model_switch', `Model switched: ${event.from} → ${event.to}${event.reason ? ` (${event.reason})` : ''}`, parent);
        break;
      case 'subagent':
        this.applySubagent(event.id, event.phase, event, parent, runId);
        break;
      case 'todo_update':
        this.updateTodos(event.todos ?? [], parent, runId);
        break;
      case 'error':
        this.addNotice('error', event.message || 'error', parent, { runId, reason: event.reason });
        break;
      case 'usage':
        if (!parent) {
          this.runUsage.set(runId, event);
          this._usage.emit(event);
        }
        break;
      case 'done':
        this.finish(runId, event.reason ?? 'finished');
        break;
      default:
        break;
    }
    return true;
  }

  /**
   * Rebuild a session from its history (history.ts): each run's prompt from its messages, then
   * its stored `events` replayed through `apply`, exactly as they were shown live (`skipRunId`,
   * the run still going, continues from its stream). `runEnds` (run id → how it ended) closes a
   * run whose process died before it stored its `done`.
   */
  loadMessages(
    messages: readonly IStoredMessage[],
    skipRunId?: string | null,
    runEnds: ReadonlyMap<string, string> = new Map(),
    events: readonly IStoredEvent[] = []
  ): void {
    this.bulk = true;
    try {
      for (const _ of historySteps(this, messages, events, skipRunId, runEnds)) {
        // all at once
      }
    } finally {
      this.bulk = false;
    }
    this._changed.emit({ type: 'reset' });
  }

  /**
   * `loadMessages` (events in `opts.events`) in slices of `sliceMs`, yielding to the browser
   * between them; returns false, stopped, when `stale()` says another session was opened.
   */
  async loadMessagesAsync(
    messages: readonly IStoredMessage[],
    skipRunId: string | null | undefined,
    runEnds: ReadonlyMap<string, string>,
    opts: { sliceMs?: number; stale?: () => boolean; events?: readonly IStoredEvent[] } = {}
  ): Promise<boolean> {
    const steps = historySteps(this, messages, opts.events ?? [], skipRunId, runEnds);
    const done = await runInSlices(steps, opts.sliceMs ?? SLICE_MS, opts.stale, on => (this.bulk = on));
    if (done) {
      this._changed.emit({ type: 'reset' });
    }
    return done;
  }

  /** Record a question's answer locally (the POST is the caller's business). */
  setAnswer(requestId: string, answer: string | null, opts: { pending?: boolean; error?: string | null } = {}): void {
    const q = this.questions.get(requestId);
    if (!q) {
      return;
    }
    q.answer = answer;
    q.pending = opts.pending ?? false;
    q.error = opts.error ?? null;
    this.touch(q);
    if (q.variant === 'permission' && q.toolCallId && answer !== null && !q.pending) {
      this.setWaiting(q.toolCallId, false);
    }
  }

  /** The head of the line a tool is shown on (itself unless it repeats an earlier call). */
  headOf(tool: IToolItem): IToolItem {
    return tool.repeatOf ?? tool;
  }

  /**
   * Apply a stored event (history.ts) through the live path, stamped with when it happened
   * (`time`, ms) and marked `replayed` so the view may render it lazily.
   */
  replay(runId: string, seq: number, event: AgentEvent, time: number | undefined): boolean {
    this.replayAt = time ?? Date.now();
    try {
      return this.apply(runId, seq, event);
    } finally {
      this.replayAt = null;
    }
  }

  /** When an item being made happened: the replayed event's time, else now. */
  now(): number {
    return this.replayAt ?? Date.now();
  }

  // -- building blocks (also used by history.ts) -----------------------------------------------

  /** The items of run `runId` (nested ones too), in the order they were made. */
  itemsOfRun(runId: string): readonly TimelineItem[] {
    return this.byRun.get(runId) ?? [];
  }

  add(item: TimelineItem, parent: ISubagentItem | null, at?: number): void {
    item.parent = parent;
    // every item says when it happened: a replayed tool line, question or banner carries its
    // stored event's time (the "Astro · 21:04" header above a tool line read the reopen time)
    item.time ??= this.now();
    if (item.runId) {
      const mine = this.byRun.get(item.runId);
      if (mine) {
        mine.push(item);
      } else {
        this.byRun.set(item.runId, [item]);
      }
    }
    if (this.replayAt !== null) {
      item.replayed = true;
    }
    const list = parent ? parent.children : this._items;
    if (this.bulk) {
      list.splice(at ?? list.length, 0, item);
    } else if (at === undefined || at >= list.length) {
      list.push(item);
      this._changed.emit({ type: 'added', item, parent });
    } else {
      const before = list[at];
      list.splice(at, 0, item);
      this._changed.emit({ type: 'added', item, parent, before });
    }
  }

  touch(item: TimelineItem): void {
    item.version++;
    if (this.bulk) {
      return;
    }
    this._changed.emit({ type: 'updated', item });
    if (item.kind === 'tool' && item.repeatOf) {
      item.repeatOf.version++; // the head shows the group's status
      this._changed.emit({ type: 'updated', item: item.repeatOf });
    }
  }

  /**
   * Fold `tool` into the line of the tool just before it when it repeats it: the same call
   * (name and arguments), or the same error (name and error text) — a looping run reads as
   * one line "×18", not a wall of identical cards.
   */
  group(tool: IToolItem): void {
    if (tool.repeatOf || tool.repeats.length || !tool.callSeen) {
      return;
    }
    const list = this.container(tool.parent);
    let i = list.lastIndexOf(tool) - 1;
    while (i >= 0 && list[i].kind === 'notice' && (list[i] as INoticeItem).hidden) {
      i--; // a "preparing <tool>…" line that is over sits between the calls: it does not break a repeat
    }
    const prev = i >= 0 ? list[i] : null;
    if (!prev || prev.kind !== 'tool' || prev.runId !== tool.runId) {
      return;
    }
    const head = prev.repeatOf ?? prev;
    if (!head.callSeen || head.name !== tool.name) {
      return;
    }
    const members = [head, ...head.repeats];
    const sameCall = callSignature(head) === callSignature(tool) && members.every(m => callSignature(m) === callSignature(head));
    const sameError =
      tool.status === 'error' &&
      members.every(m => m.status === 'error' && m.result?.output === tool.result?.output);
    if (!sameCall && !sameError) {
      return;
    }
    tool.repeatOf = head;
    head.repeats.push(tool);
    this.touch(tool);
  }

  private setWaiting(toolCallId: string, waiting: boolean): void {
    const tool = toolCallId ? this.tools.get(toolCallId) : undefined;
    if (!tool) {
      return;
    }
    if (waiting && tool.status === 'running') {
      tool.status = 'waiting';
      this.touch(tool);
    } else if (!waiting && tool.status === 'waiting') {
      tool.status = 'running';
      this.touch(tool);
    }
  }

  /** One plan per run (and subagent), updated in place and placed at the top of the run. */
  private updateTodos(todos: ITodo[], parent: ISubagentItem | null, runId: string): void {
    const scope = `${runId}\u0000${parent?.id ?? ''}`;
    const existing = this.todos.get(scope);
    if (existing) {
      existing.todos = todos;
      this.touch(existing);
      return;
    }
    const item: ITodoItem = { key: nextKey('todo'), kind: 'todo', version: 0, parent, todos, runId, active: true };
    this.todos.set(scope, item);
    const list = this.container(parent);
    let at = 0;
    if (!parent) {
      // just after the prompt that started this run
      for (let i = list.length - 1; i >= 0; i--) {
        if (list[i].kind === 'user') {
          at = i + 1;
          break;
        }
      }
    }
    this.add(item, parent, at);
  }

  addEnd(cause: EndReason | IEndCause, runId: string): IEndItem {
    const banner = endBanner(typeof cause === 'string' ? { reason: cause } : cause);
    const item: IEndItem = { key: nextKey('end'), kind: 'end', version: 0, parent: null, ...banner, runId };
    this.add(item, null);
    return item;
  }

  private container(parent: ISubagentItem | null): TimelineItem[] {
    return parent ? parent.children : this._items;
  }

  private appendText(kind: 'text' | 'thinking', delta: string, step: number, parent: ISubagentItem | null, runId: string): void {
    const list = this.container(parent);
    const last = list[list.length - 1];
    if (last && last.kind === kind && last.streaming && last.step === step && last.runId === runId) {
      last.text += delta;
      this.touch(last);
      return;
    }
    const item: ITextItem = { key: nextKey(kind), kind, version: 0, parent, text: delta, step, streaming: true, runId, time: this.now() };
    this.add(item, parent);
  }

  ensureTool(id: string, parent: ISubagentItem | null, runId: string): IToolItem {
    let tool = this.tools.get(id);
    if (!tool) {
      tool = {
        key: nextKey('tool'),
        kind: 'tool',
        version: 0,
        parent,
        id,
        name: '',
        arguments: null,
        step: 0,
        callSeen: false,
        progress: null,
        result: null,
        status: 'running',
        startedAt: this.now(),
        runId,
        repeatOf: null,
        repeats: []
      };
      this.tools.set(id, tool);
      this.add(tool, parent);
    }
    return tool;
  }

  private setResult(event: IToolResultEvent, parent: ISubagentItem | null, runId: string): void {
    const tool = this.ensureTool(event.tool_call_id, parent, runId);
    if (!tool.name) {
      tool.name = event.name;
    }
    tool.result = {
      output: typeof event.output === 'string' ? event.output : JSON.stringify(event.output, null, 2),
      isError: !!event.is_error,
      metadata: (event.metadata ?? {}) as Record<string, unknown>,
      durationMs: typeof event.duration_ms === 'number' ? event.duration_ms : null
    };
    tool.status = resultStatus(tool.result);
    this.touch(tool);
    if (tool.status === 'error') {
      this.group(tool);
    }
  }

  private ensureSubagent(id: string, runId: string): ISubagentItem {
    return this.subagents.get(id) ?? this.ensureSubagentIn(id, null, runId);
  }

  private applySubagent(
    id: string,
    phase: 'start' | 'stop',
    event: { task?: string; parent_tool_call_id?: string; summary?: string; is_error?: boolean },
    parent: ISubagentItem | null,
    runId: string
  ): void {
    let sub = this.subagents.get(id);
    if (!sub) {
      sub = this.ensureSubagentIn(id, parent, runId);
    } else if (parent && sub.parent === null && parent !== sub && this._items.includes(sub)) {
      // Its children arrived before its start: it was placed at the top; move it under its parent.
      this._items.splice(this._items.indexOf(sub), 1);
      sub.parent = parent;
      parent.children.push(sub);
      this._changed.emit({ type: 'reset' });
    }
    if (event.task) {
      sub.task = event.task;
    }
    if (event.parent_tool_call_id) {
      sub.parentToolCallId = event.parent_tool_call_id;
    }
    if (phase === 'stop') {
      sub.phase = 'stopped';
      sub.summary = event.summary ?? sub.summary;
      sub.isError = !!event.is_error;
      this.closeStreaming(sub.children);
    }
    this.touch(sub);
  }

  private ensureSubagentIn(id: string, parent: ISubagentItem | null, runId: string): ISubagentItem {
    const sub: ISubagentItem = {
      key: nextKey('subagent'),
      kind: 'subagent',
      version: 0,
      parent,
      id,
      task: '',
      parentToolCallId: '',
      phase: 'running',
      summary: '',
      isError: false,
      children: [],
      runId
    };
    this.subagents.set(id, sub);
    this.add(sub, parent);
    return sub;
  }

  private addQuestion(q: QuestionFields, parent: ISubagentItem | null, runId: string): void {
    if (this.questions.has(q.requestId)) {
      return;
    }
    const item: IQuestionItem = {
      key: nextKey('question'),
      kind: 'question',
      version: 0,
      parent,
      answer: null,
      pending: false,
      error: null,
      runId,
      ...q
    };
    this.questions.set(q.requestId, item);
    this.add(item, parent);
  }

  /** The "preparing" line of a run (or subagent) is over once anything else of it arrives. */
  private endPreparing(runId: string, subagentId: string | null): void {
    const key = `${runId}/${subagentId ?? ''}`;
    const line = this.preparing.get(key);
    if (line) {
      this.preparing.delete(key);
      line.hidden = true;
      this.touch(line);
    }
  }

  private closeStreaming(items: TimelineItem[]): void {
    for (const item of items) {
      if ((item.kind === 'text' || item.kind === 'thinking') && item.streaming) {
        item.streaming = false;
        this.touch(item);
      }
    }
  }

  finish(runId: string, reason: string): void {
    for (const item of this.itemsOfRun(runId)) {
      if ((item.kind === 'text' || item.kind === 'thinking') && item.streaming) {
        item.streaming = false;
        this.touch(item);
      } else if (item.kind === 'tool' && (item.status === 'running' || item.status === 'waiting')) {
        item.status = reason === 'cancelled' ? 'cancelled' : 'interrupted';
        this.touch(item);
      } else if (item.kind === 'todo' && item.active) {
        item.active = false;
        this.touch(item);
      } else if (item.kind === 'question' && item.answer === null) {
        item.answer = 'expired';
        this.touch(item);
      } else if (item.kind === 'subagent' && item.phase === 'running') {
        item.phase = 'stopped';
        this.touch(item);
      }
    }
    const usage = this.runUsage.get(runId);
    if (usage) {
      this.addNotice('usage', usageText(usage), null, { runId });
    }
    if (reason === 'cancelled' || reason === 'max_steps' || reason === 'error') {
      this.addEnd(this.endCause(runId, reason), runId);
    } else if (reason === 'finished' && this.cutOff.has(runId)) {
      this.addEnd('truncated', runId);
    }
    this._finished.emit({ runId, reason });
  }

  /** Why run `runId` ended: its last error's reason and its longest row of identical failing calls. */
  private endCause(runId: string, reason: EndReason): IEndCause {
    let errorReason: string | undefined;
    let failedRepeats = 0;
    let streak = 0;
    let last = '';
    for (const item of this.itemsOfRun(runId)) {
      if (item.kind === 'notice' && item.variant === 'error' && item.reason && item.reason !== 'notice') {
        errorReason = item.reason;
      } else if (item.kind === 'tool' && !item.parent) {
        // the longest row of the same call failing: what the "×N" line shows
        const signature = callSignature(item);
        streak = item.status === 'error' ? (signature === last ? streak + 1 : 1) : 0;
        last = signature;
        failedRepeats = Math.max(failedRepeats, streak);
      }
    }
    return { reason, errorReason, failedRepeats };
  }
}

