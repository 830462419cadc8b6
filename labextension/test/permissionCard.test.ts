// @vitest-environment happy-dom
/** Permission cards (issue 24 item 8): the command once, with its line breaks; every other argument in
 * full; a notebook_edit replace as a diff; folded to one line once answered; the answer as the button said
 * it; a denied call's line reads "declined", not "failed". */
import { describe, expect, it } from 'vitest';

import { TimelineModel } from '../src/timeline';
import { IRenderContext } from '../src/widgets/items';
import { TimelineView } from '../src/widgets/timelineView';
import { AgentEvent } from '../src/tokens';
import { renderContext } from './support';

const answers: string[] = [];
const ctx = (): IRenderContext => renderContext({ answer: (_id: string, answer: string) => void answers.push(answer) });

function setup(events: AgentEvent[]): { model: TimelineModel; view: TimelineView; card: () => HTMLElement } {
  const model = new TimelineModel();
  const view = new TimelineView(model, ctx());
  document.body.appendChild(view.node);
  events.forEach((e, i) => model.apply('run_1', i + 1, e));
  view.flush();
  return { model, view, card: () => view.node.querySelector<HTMLElement>('.jp-Astro-permission')! };
}

const visible = (el: Element | null): boolean => {
  for (let e = el as HTMLElement | null; e; e = e.parentElement) {
    if (e.hidden) {
      return false;
    }
  }
  return el !== null;
};

/** The text a reader sees: the card without its hidden parts. */
function seen(el: HTMLElement): string {
  const copy = el.cloneNode(true) as HTMLElement;
  copy.querySelectorAll('[hidden]').forEach(e => e.remove());
  return copy.textContent ?? '';
}

const COMMAND = 'cd data/m31\nls -la\necho done';
const bash = (command: string, extra: Record<string, unknown> = {}): AgentEvent[] => [
  { type: 'tool_call', id: 'b', name: 'run_bash', arguments: { command, ...extra }, step: 1 },
  {
    type: 'permission_request',
    request_id: 'r1',
    tool_call_id: 'b',
    name: 'run_bash',
    arguments: { command, ...extra },
    message: `run_bash wants to run: ${command}`
  }
];

describe('permission card', () => {
  it('shows the command once, as code with its line breaks, and every other argument in full', () => {
    const { card } = setup(bash(COMMAND, { timeout: 60, env: { NAME: 'a\u202eb' } }));
    const text = seen(card());
    expect(text.split('echo done').length - 1).toBe(1);
    expect(text).not.toContain('\\n');
    const code = card().querySelector('pre.jp-Astro-question-code')!;
    expect(visible(code)).toBe(true);
    expect(code.textContent).toBe(COMMAND);
    const args = Array.from(card().querySelectorAll('.jp-Astro-question-args dt')).map(dt => dt.textContent);
    expect(args).toEqual(['timeout', 'env']);
    // the hidden character inside a nested argument is shown as an escape, not as itself
    expect(text).toContain('\\u202e');
    expect(text).not.toContain('\u202e');
  });

  it('offers a primary Allow and a secondary Deny, and folds to one line once allowed', () => {
    const { model, view, card } = setup(bash(COMMAND));
    const deny = Array.from(card().querySelectorAll('button')).find(b => b.textContent === 'Deny')!;
    const allow = Array.from(card().querySelectorAll('button')).find(b => b.textContent === 'Allow')!;
    expect(allow.classList.contains('jp-mod-accept')).toBe(true);
    expect(deny.classList.contains('jp-mod-accept')).toBe(false);
    const summary = card().querySelector<HTMLButtonElement>('.jp-Astro-question-summary')!;
    expect(visible(summary)).toBe(false);
    model.setAnswer('r1', 'allow');
    view.flush();
    expect(visible(summary)).toBe(true);
    expect(summary.textContent).toBe('Allowed: run_bash `cd data/m31` …');
    expect(visible(card().querySelector('pre.jp-Astro-question-code'))).toBe(false);
    expect(seen(card()).trim()).toBe(summary.textContent);
    expect(summary.getAttribute('aria-expanded')).toBe('false');
    summary.click();
    view.flush();
    expect(summary.getAttribute('aria-expanded')).toBe('true');
    expect(visible(card().querySelector('pre.jp-Astro-question-code'))).toBe(true);
    expect(seen(card())).toContain('Answered: Allow');
  });

  it('says what the button said: "Allow for this notebook", not "always allow for this session"', () => {
    const args = { path: 'lc.ipynb', cell_id: 'c1' };
    const { model, view, card } = setup([
      { type: 'tool_call', id: 'n', name: 'notebook_run', arguments: args, step: 1 },
      { type: 'permission_request', request_id: 'r1', tool_call_id: 'n', name: 'notebook_run', arguments: args,
        message: 'notebook_run wants to run cell c1 of lc.ipynb', code: 'x = 1\nprint(x)', scope: '/w/lc.ipynb' }
    ]);
    const always = Array.from(card().querySelectorAll('button')).find(b => /notebook/.test(b.textContent ?? ''))!;
    expect(always.textContent).toBe('Allow for this notebook');
    model.setAnswer('r1', 'always');
    view.flush();
    const summary = card().querySelector<HTMLButtonElement>('.jp-Astro-question-summary')!;
    expect(summary.textContent).toBe('Allowed for this notebook: notebook_run `x = 1` …');
    summary.click();
    view.flush();
    expect(seen(card())).toContain('Answered: Allow for this notebook');
    expect(card().textContent).not.toMatch(/session/);
  });

  it('asks a notebook_edit replace as a diff of the cell as it is now', () => {
    const args = { path: 'lc.ipynb', action: 'replace', cell_id: 'c1', source: 'a = 1\nb = 3\nc = 3' };
    const { card } = setup([
      { type: 'tool_call', id: 'e', name: 'notebook_edit', arguments: args, step: 1 },
      { type: 'permission_request', request_id: 'r1', tool_call_id: 'e', name: 'notebook_edit', arguments: args,
        message: 'notebook_edit wants to replace code cell c1 of lc.ipynb', old_source: 'a = 1\nb = 2\nc = 3' }
    ]);
    const diff = card().querySelector('.jp-Astro-question-diff')!;
    expect(visible(diff)).toBe(true);
    expect(Array.from(diff.children).map(l => [l.tagName, l.textContent])).toEqual([
      ['SPAN', '  a = 1\n'],
      ['DEL', '- b = 2\n'],
      ['INS', '+ b = 3\n'],
      ['SPAN', '  c = 3\n']
    ]);
    expect(seen(card())).toContain('1 line removed, 1 added');
    expect(visible(card().querySelector('pre.jp-Astro-question-code'))).toBe(false);
    const listed = Array.from(card().querySelectorAll('.jp-Astro-question-args dt')).map(dt => dt.textContent);
    expect(listed).toEqual(['path', 'action', 'cell_id']);
  });

  it('folds to "Declined" on Deny, and the call reads declined, not failed', () => {
    const { model, view, card } = setup(bash('rm -rf build'));
    model.setAnswer('r1', 'deny');
    model.apply('run_1', 3, {
      type: 'tool_result', tool_call_id: 'b', name: 'run_bash', is_error: true,
      output: "Permission denied for run_bash: run_bash wants to run: rm -rf build (the user answered 'deny')",
      metadata: { stage: 'permission', declined: true }
    } as AgentEvent);
    view.flush();
    expect(card().querySelector('.jp-Astro-question-summary')!.textContent).toBe('Declined: run_bash `rm -rf build`');
    expect(model.tool('b')!.status).toBe('declined');
    const line = view.node.querySelector<HTMLElement>('.jp-Astro-tool[data-tool-call-id="b"]')!;
    expect(line.dataset.status).toBe('declined');
    expect(line.querySelector('.jp-Astro-tool-state')!.textContent).toBe('declined');
  });
});
