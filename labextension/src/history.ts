/**
 * Rebuilding a reopened session: the stored events of its runs replayed through the model's
 * live `apply` path, so subagent groups, pinned plans, progress, tool details and end banners
 * come back as they were shown live. This is the only way a session is rebuilt.
 *
 * Stored messages still matter: the prompt is a message (no event carries it), and each item is
 * linked to the message it shows so a history-search hit can scroll to it.
 */
import { nextTask } from './tasks';
import type { TimelineModel } from './timeline';
import { ITextItem, parseTime } from './timelineItems';
import { IStoredEvent, IStoredMessage } from './tokens';

/** The runs of a history in display order, each with its messages and stored events. */
interface IRunHistory {
  runId: string;
  messages: IStoredMessage[];
  events: IStoredEvent[];
}

function groupRuns(messages: readonly IStoredMessage[], events: readonly IStoredEvent[]): IRunHistory[] {
  const runs = new Map<string, IRunHistory>();
  const order: IRunHistory[] = [];
  const runOf = (runId: string): IRunHistory => {
    let run = runs.get(runId);
    if (!run) {
      run = { runId, messages: [], events: [] };
      runs.set(runId, run);
      order.push(run);
    }
    return run;
  };
  for (const m of messages) {
    runOf(m.run_id).messages.push(m);
  }
  for (const e of events) {
    runOf(e.run_id).events.push(e);
  }
  return order;
}

/**
 * The steps of a history rebuild (one `yield` per message or event, so a caller can slice the
 * work between frames). `skipRunId`: the run still going on the server, whose stream continues
 * after the last event replayed here (its messages other than the prompt are not shown).
 */
export function* historySteps(
  model: TimelineModel,
  messages: readonly IStoredMessage[],
  events: readonly IStoredEvent[],
  skipRunId: string | null | undefined,
  runEnds: ReadonlyMap<string, string>
): Generator<void> {
  for (const run of groupRuns(messages, events)) {
    yield* replayRun(model, run, skipRunId, runEnds);
  }
}

/**
 * Run `steps` in slices of `sliceMs`, yielding to the browser between them (a history of
 * thousands of messages would otherwise be one long main-thread task); `bulk(true)` while a
 * slice runs. False, stopped early, as soon as `stale()` says the result is no longer wanted.
 */
export async function runInSlices(
  steps: Generator<void>,
  sliceMs: number,
  stale: (() => boolean) | undefined,
  bulk: (on: boolean) => void
): Promise<boolean> {
  let done = false;
  while (!done) {
    if (stale?.()) {
      return false;
    }
    bulk(true);
    const start = Date.now();
    try {
      let n = 0;
      while (!(done = !!steps.next().done)) {
        if ((++n & 63) === 0 && Date.now() - start >= sliceMs) {
          break;
        }
      }
    } finally {
      bulk(false);
    }
    if (!done) {
      await nextTask();
    }
  }
  return true;
}

function* replayRun(
  model: TimelineModel,
  run: IRunHistory,
  skipRunId: string | null | undefined,
  runEnds: ReadonlyMap<string, string>
): Generator<void> {
  // the prompt: the user messages before the run's first answer (live, only the prompt is shown)
  for (const m of run.messages) {
    if (m.role === 'system') {
      continue;
    }
    if (m.role !== 'user') {
      break;
    }
    model.addUser(m.content, { messageId: m.id, runId: m.run_id, time: parseTime(m.created_at) });
  }
  let ended = false;
  for (const e of run.events) {
    yield;
    model.replay(run.runId, e.seq, e.event, parseTime(e.time));
    ended = ended || e.event.type === 'done';
  }
  const status = runEnds.get(run.runId);
  if (!ended && run.runId !== skipRunId && status !== undefined && status !== 'running') {
    // a run that ended without a stored done (a process that died): close it as the server did
    model.finish(run.runId, status === 'finished' ? 'finished' : status);
  }
  linkMessages(model, run);
}

/** Point items at the stored messages they show (search hits scroll to them). */
function linkMessages(model: TimelineModel, run: IRunHistory): void {
  const texts = model.itemsOfRun(run.runId).filter((i): i is ITextItem => i.kind === 'text' && i.parent === null);
  let k = 0;
  for (const m of run.messages) {
    if (m.role === 'assistant') {
      if (m.content && k < texts.length) {
        texts[k].messageId = m.id;
        texts[k].time = parseTime(m.created_at) ?? texts[k].time;
        k++;
      }
      for (const call of m.tool_calls ?? []) {
        const tool = model.tool(call.id);
        if (tool && tool.messageId === undefined) {
          tool.messageId = m.id;
        }
      }
    } else if (m.role === 'tool' && m.tool_call_id) {
      const tool = model.tool(m.tool_call_id);
      if (tool) {
        tool.resultMessageId = m.id;
      }
    }
  }
}
