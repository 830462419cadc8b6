// @vitest-environment happy-dom
/** What a run costs (a tokens/cost line under the answer, the context gauge, the session total) and
 * an end banner that names the reason and offers the action that fits it. */
import { describe, expect, it } from 'vitest';

import { EndAction, IEndItem, TimelineModel } from '../src/timeline';
import { AgentEvent, IUsageEvent } from '../src/tokens';
import { IRenderContext } from '../src/widgets/items';
import { buildComposer, buildHeader, showContext, showSessionUsage } from '../src/widgets/panelChrome';
import { TimelineView } from '../src/widgets/timelineView';

function mount(): { model: TimelineModel; view: TimelineView; clicked: [IEndItem, EndAction][] } {
  const clicked: [IEndItem, EndAction][] = [];
  const ctx: IRenderContext = {
    rendermime: null,
    answer: () => undefined,
    openPath: () => undefined,
    code: () => undefined,
    continueRun: (item, action) => clicked.push([item, action]),
    expandTools: () => false,
    lazy: null
  };
  const model = new TimelineModel();
  const view = new TimelineView(model, ctx);
  document.body.appendChild(view.node);
  return { model, view, clicked };
}

function play(model: TimelineModel, events: AgentEvent[]): void {
  events.forEach((e, i) => model.apply('r1', i + 1, e));
}

const done = (reason: 'finished' | 'error' | 'max_steps' | 'cancelled'): AgentEvent => ({ type: 'done', session_id: 's', run_id: 'r1', reason });

function banner(view: TimelineView): { text: string; actions: { label: string; primary: boolean; el: HTMLButtonElement }[] } {
  view.flush();
  const end = view.node.querySelector<HTMLElement>('.jp-Astro-end');
  expect(end).not.toBeNull();
  const actions = Array.from(end!.querySelectorAll<HTMLButtonElement>('button')).map(el => ({
    label: el.textContent ?? '',
    primary: el.classList.contains('jp-mod-accept'),
    el
  }));
  return { text: end!.textContent ?? '', actions };
}

const usage: IUsageEvent = {
  type: 'usage',
  model: 'gpt-4o-mini',
  prompt_tokens: 12000,
  completion_tokens: 345,
  cost_usd: 0.002007,
  context_tokens: 9000,
  context_window: 16384,
  compact_at: 9600
};

describe('what a run costs', () => {
  it('shows the tokens and cost under the answer, and "unknown" when no price is set', () => {
    const { model, view } = mount();
    const firstCall: IUsageEvent = { ...usage, prompt_tokens: 5000, completion_tokens: 20, cost_usd: 0.0008 };
    play(model, [firstCall, { type: 'text_delta', delta: 'M 31 is the Andromeda galaxy.', step: 2 }, usage, done('finished')]);
    view.flush();
    const line = view.node.querySelector<HTMLElement>('.jp-Astro-usage');
    // one line per run, with the run's total (the last usage event is cumulative)
    expect(view.node.querySelectorAll('.jp-Astro-usage')).toHaveLength(1);
    expect(line?.textContent).toBe('12,345 tokens (12,000 in · 345 out) · $0.0020');
    // right after the answer it belongs to
    expect(model.items.map(i => i.kind + (i.kind === 'notice' ? `:${i.variant}` : ''))).toEqual(['text', 'notice:usage']);

    const other = mount();
    play(other.model, [{ type: 'text_delta', delta: 'Hi.', step: 1 }, { ...usage, model: 'qwen2.5-7b', cost_usd: null }, done('finished')]);
    other.view.flush();
    expect(other.view.node.querySelector('.jp-Astro-usage')?.textContent).toBe(
      '12,345 tokens (12,000 in · 345 out) · cost unknown (no llm_prices entry for qwen2.5-7b)'
    );
  });

  it('fills the context gauge and marks where compaction starts', () => {
    const { model } = mount();
    const composer = buildComposer({ send: () => undefined, sendOrStop: () => undefined, openModels: () => undefined });
    const gauge = composer.gauge;
    expect(gauge.hidden).toBe(true);
    model.usage.connect((_, u) => showContext(gauge, u));
    play(model, [usage, done('finished')]);
    expect(gauge.hidden).toBe(false);
    expect(gauge.getAttribute('role')).toBe('meter');
    expect(gauge.getAttribute('aria-valuenow')).toBe('9000');
    expect(gauge.getAttribute('aria-valuemax')).toBe('16384');
    expect(gauge.querySelector<HTMLElement>('.jp-Astro-gauge-fill')!.style.width).toBe('55%');
    expect(gauge.querySelector<HTMLElement>('.jp-Astro-gauge-mark')!.style.left).toBe('59%');
    expect(gauge.title).toBe('Context: 9,000 of 16,384 tokens (55%); compaction starts at 9,600 (59%)');
    expect(gauge.dataset.near).toBe('true');
    model.clear();
    expect(gauge.hidden).toBe(true);
  });

  it('sums the session from each run once (usage events are cumulative), live or replayed', () => {
    const model = new TimelineModel();
    const call1: IUsageEvent = { type: 'usage', model: 'gpt-4o-mini', prompt_tokens: 800, completion_tokens: 40, cost_usd: 0.000144 };
    const call2: IUsageEvent = { ...call1, prompt_tokens: 1700, completion_tokens: 100, cost_usd: 0.000315 };
    model.apply('r1', 1, call1);
    model.apply('r1', 2, call2);
    model.apply('r1', 3, { type: 'done', session_id: 's', run_id: 'r1', reason: 'finished' });
    model.apply('r2', 1, { ...call1, model: 'qwen2.5-7b', cost_usd: null });
    expect(model.sessionUsage()).toEqual({ runs: 2, prompt_tokens: 2500, completion_tokens: 140, cost_usd: 0.000315, unpriced_runs: 1 });
    model.clear();
    expect(model.sessionUsage()).toBeUndefined();
  });

  it('shows the session total in the header, saying when some runs have no price', () => {
    const header = buildHeader({ newSession: () => undefined, toggleSessions: () => undefined, exportSession: () => undefined, openMore: () => undefined });
    showSessionUsage(header.usage, { runs: 2, prompt_tokens: 3200, completion_tokens: 400, cost_usd: 0.00072, unpriced_runs: 0 });
    expect(header.usage.hidden).toBe(false);
    expect(header.usage.textContent).toBe('3,600 tokens · $0.00072');
    showSessionUsage(header.usage, { runs: 3, prompt_tokens: 30000, completion_tokens: 400, cost_usd: null, unpriced_runs: 3 });
    expect(header.usage.textContent).toBe('30k tokens · cost unknown');
    expect(header.usage.title).toContain('3 of 3 runs have no price in llm_prices');
    showSessionUsage(header.usage, undefined);
    expect(header.usage.hidden).toBe(true);
  });
});

describe('the end banner names the reason and offers what fits', () => {
  it('an unknown model offers Switch model, not Try again', () => {
    const { model, view, clicked } = mount();
    play(model, [
      { type: 'error', message: "The LLM endpoint does not know model 'gpt-4o-mini' (HTTP 404).", reason: 'unknown_model' },
      done('error')
    ]);
    const b = banner(view);
    expect(b.text).toContain('does not serve this model');
    expect(b.text).not.toContain('Something went wrong');
    expect(b.actions.map(a => a.label)).toEqual(['Switch model']);
    b.actions[0].el.click();
    expect(clicked.map(c => c[1])).toEqual(['switch_model']);
    expect(b.actions[0].el.disabled).toBe(false); // the menu may be closed and opened again
  });

  it('a rejected key says to set OPENAI_API_KEY and offers no retry', () => {
    const { model, view } = mount();
    play(model, [{ type: 'error', message: 'The LLM endpoint rejected the credentials (HTTP 401).', reason: 'auth' }, done('error')]);
    const b = banner(view);
    expect(b.text).toContain('OPENAI_API_KEY');
    expect(b.actions).toEqual([]);
  });

  it('an unreachable endpoint offers Try again', () => {
    const { model, view, clicked } = mount();
    play(model, [{ type: 'error', message: 'Cannot reach the LLM endpoint at http://127.0.0.1:9/v1', reason: 'llm_unavailable' }, done('error')]);
    const b = banner(view);
    expect(b.text).toContain('could not be reached');
    expect(b.actions.map(a => [a.label, a.primary])).toEqual([['Try again', true]]);
    b.actions[0].el.click();
    expect(clicked.map(c => c[1])).toEqual(['retry']);
  });

  it('the step limit offers more steps, but after many identical failing calls a new chat comes first', () => {
    const plain = mount();
    play(plain.model, [done('max_steps')]);
    expect(banner(plain.view).actions.map(a => [a.label, a.primary])).toEqual([['Continue with more steps', true]]);

    const { model, view, clicked } = mount();
    const events: AgentEvent[] = [];
    for (let i = 0; i < 20; i++) {
      // the client announces each call as it is written: the passing "preparing" line must not part the fold
      events.push({ type: 'tool_call_preparing', index: 0, name: 'query_target', chars: 0, step: i + 1 });
      events.push({ type: 'tool_call', id: `c${i}`, name: 'query_target', arguments: { name: 'M 999' }, step: i + 1 });
      events.push({ type: 'tool_result', tool_call_id: `c${i}`, name: 'query_target', output: 'Sesame: no object M 999', is_error: true, step: i + 1 });
    }
    play(model, [...events, done('max_steps')]);
    const b = banner(view);
    expect(view.node.querySelector('.jp-Astro-tool-count')?.textContent).toBe('×20');
    expect(b.text).toContain('failed 20 times');
    expect(b.actions.map(a => [a.label, a.primary])).toEqual([
      ['Start a new chat', true],
      ['Try again', false],
      ['Continue with more steps', false]
    ]);
    b.actions[0].el.click();
    expect(clicked.map(c => c[1])).toEqual(['new_chat']);
    expect(b.actions.every(a => a.el.disabled)).toBe(true);
  });

  it('an answer cut off at the output limit offers Continue; one that went on after a cut call does not', () => {
    const { model, view, clicked } = mount();
    play(model, [
      { type: 'text_delta', delta: 'The galaxy M 31 is', step: 1 },
      { type: 'truncated', step: 1, max_tokens: 1024, message: 'The answer was cut off.' },
      done('finished')
    ]);
    const b = banner(view);
    expect(b.text).toContain('cut off');
    expect(b.actions.map(a => a.label)).toEqual(['Continue']);
    b.actions[0].el.click();
    expect(clicked.map(c => c[1])).toEqual(['continue']);

    const other = mount();
    play(other.model, [
      { type: 'truncated', step: 1, max_tokens: 1024, tool_name: 'save_note', message: 'cut while writing save_note' },
      { type: 'text_delta', delta: 'Here is a short answer instead.', step: 2 },
      done('finished')
    ]);
    other.view.flush();
    expect(other.view.node.querySelector('.jp-Astro-end')).toBeNull();
  });
});
