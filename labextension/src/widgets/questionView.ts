/**
 * A question the run asks: an `ask_user` question or a permission request, answered in place.
 *
 * A permission card shows what will run once: the command (or the cell's code) as code with its real line
 * breaks, a notebook_edit replace as a diff of the cell, every other argument in full below it (hidden
 * characters shown as escapes, as issue 22 asks). Allow is the primary action, Deny a calm secondary one.
 * Once answered the card folds to one line ("Allowed: run_bash `ls`", "Declined: …") that expands again.
 */
import { IQuestionItem } from '../timeline';
import {
  button,
  countHidden,
  diffSummary,
  h,
  keyArgument,
  prettyJSON,
  renderDiff,
  renderVisible,
  visibleText
} from './dom';
import { iconEl, STATUS_ICON } from './icons';
import { ItemView } from './itemView';

/** Arguments shown as the code block of a card, most telling first (else the call's key argument). */
const CODE_ARGS = ['command', 'code', 'source', 'content'];

/** The label of the "always" button (and of the answer it gives): the server scopes notebook tools to the notebook. */
export function alwaysLabel(toolName: string): string {
  return /^notebook_(edit|run)$/.test(toolName) ? 'Allow for this notebook' : 'Always allow for this session';
}

/** What the button that gave `answer` said ("Allow", "Deny", "Allow for this notebook"), else the answer itself. */
export function answerLabel(q: Pick<IQuestionItem, 'variant' | 'toolName'>, answer: string): string {
  if (q.variant !== 'permission') {
    return answer;
  }
  const labels: Record<string, string> = { allow: 'Allow', deny: 'Deny', always: alwaysLabel(q.toolName) };
  return labels[answer] ?? answer;
}

/** The main argument of a permission question: its name ('' when the arguments are not an object) and text. */
export function mainArgument(args: unknown): { name: string; text: string } {
  const record = args && typeof args === 'object' ? (args as Record<string, unknown>) : null;
  if (!record) {
    return { name: '', text: args === null || args === undefined ? '' : prettyJSON(args) };
  }
  const name =
    CODE_ARGS.find(k => typeof record[k] === 'string') ??
    (() => {
      const key = keyArgument(args);
      return Object.keys(record).find(k => record[k] === key) ?? '';
    })();
  return { name, text: name ? String(record[name]) : '' };
}

/** One line for an answered permission card: "Allowed: run_bash `ls -la`", "Declined: …". */
export function answeredSummary(q: IQuestionItem): string {
  const verdict: Record<string, string> = {
    allow: 'Allowed',
    always: /^notebook_/.test(q.toolName) ? 'Allowed for this notebook' : 'Allowed for this session',
    deny: 'Declined',
    expired: 'Not answered'
  };
  const head = verdict[q.answer ?? ''] ?? (q.answer?.startsWith('(no answer') ? 'Not answered' : `Answered ${q.answer}`);
  const main = q.code || mainArgument(q.arguments).text;
  const first = main.split('\n')[0];
  const shown = first.length > 60 ? `${first.slice(0, 59)}…` : first;
  const more = main.includes('\n') || first.length > 60 ? ' …' : '';
  return visibleText(`${head}: ${q.toolName}${shown ? ` \`${shown}\`${more}` : ''}`);
}

export class QuestionView extends ItemView<IQuestionItem> {
  private text!: HTMLElement;
  private summary!: HTMLButtonElement;
  private body!: HTMLElement;
  private detail!: HTMLElement;
  private codeHead!: HTMLElement;
  private code!: HTMLPreElement;
  private diffBox!: HTMLElement;
  private rest!: HTMLElement;
  private actions!: HTMLElement;
  private input!: HTMLInputElement;
  private state!: HTMLElement;
  private buttons!: HTMLButtonElement[]; // set in build(), which runs before field initialisers
  private shown: string | undefined = undefined;
  /** The user opened an answered card again (it stays open). */
  private expanded = false;

  protected build(): HTMLElement {
    const q = this.item;
    this.text = h('div', { class: 'jp-Astro-question-text' });
    this.summary = button('', () => this.toggle(), {
      class: 'jp-Astro-question-summary',
      'aria-expanded': 'false',
      hidden: true
    });
    this.detail = h('div', { class: 'jp-Astro-question-detail', hidden: true });
    this.codeHead = h('div', { class: 'jp-Astro-question-meta', hidden: true });
    this.code = h('pre', { class: 'jp-Astro-pre jp-Astro-question-code', hidden: true });
    this.diffBox = h('div', { class: 'jp-Astro-question-diffbox', hidden: true });
    this.rest = h('dl', { class: 'jp-Astro-question-args', hidden: true });
    this.actions = h('div', { class: 'jp-Astro-question-actions' });
    this.state = h('div', { class: 'jp-Astro-question-state', role: 'status' });
    const send = (answer: string) => this.ctx.answer(q.requestId, answer);
    if (q.variant === 'permission') {
      this.buttons = [
        button('Allow', () => send('allow'), { class: 'jp-Astro-button jp-mod-accept' }),
        button('Deny', () => send('deny'), { class: 'jp-Astro-button jp-mod-reject' }),
        // notebook tools: the server scopes "always" to the notebook (docs/notebook-bridge.md)
        button(alwaysLabel(q.toolName), () => send('always'), { class: 'jp-Astro-button' })
      ];
    } else {
      this.buttons = (q.options ?? []).map(option => button(visibleText(option), () => send(option)));
      this.input = h('input', { type: 'text', class: 'jp-Astro-input', 'aria-label': 'Your answer', placeholder: 'Type an answer…' });
      const submit = button('Answer', () => {
        if (this.input.value.trim()) {
          send(this.input.value.trim());
        }
      });
      this.input.addEventListener('keydown', ev => {
        if (ev.key === 'Enter' && this.input.value.trim()) {
          ev.preventDefault();
          send(this.input.value.trim());
        }
      });
      this.buttons.push(submit);
    }
    this.actions.append(...this.buttons);
    if (this.input) {
      this.actions.appendChild(this.input);
    }
    this.body = h(
      'div',
      { class: 'jp-Astro-question-body' },
      h('div', { class: 'jp-Astro-question-head' }, iconEl(STATUS_ICON.waiting), this.text),
      this.detail,
      this.codeHead,
      this.code,
      this.diffBox,
      this.rest,
      this.actions
    );
    return h(
      'div',
      {
        class: `jp-Astro-item jp-Astro-question jp-Astro-${q.variant}`,
        role: 'group',
        'aria-label': q.variant === 'permission' ? 'Permission request' : 'Question from the agent'
      },
      this.summary,
      this.body,
      this.state
    );
  }

  update(): void {
    const q = this.item;
    this.el.dataset.requestId = q.requestId;
    if (q.variant === 'permission') {
      const key = JSON.stringify([q.question, q.code, q.oldSource, q.arguments]);
      if (this.shown !== key) {
        this.shown = key;
        this.showPermission();
      }
    } else {
      renderVisible(this.text, q.question);
    }
    const closed = q.answer !== null || q.pending;
    for (const b of this.buttons) {
      b.disabled = closed;
    }
    if (this.input) {
      this.input.disabled = closed;
    }
    const answered = q.answer !== null && !q.pending && !q.error;
    this.el.classList.toggle('jp-mod-answered', answered);
    // an answered permission card folds to one line; its summary opens it again
    const foldable = answered && q.variant === 'permission';
    this.summary.hidden = !foldable;
    if (foldable) {
      this.summary.textContent = answeredSummary(q);
      this.summary.title = this.expanded ? 'Hide the details' : 'Show what was asked';
    }
    const folded = foldable && !this.expanded;
    this.el.classList.toggle('jp-mod-folded', folded);
    this.body.hidden = folded;
    this.summary.setAttribute('aria-expanded', String(foldable && this.expanded));
    this.el.dataset.answer = q.answer ?? '';
    this.actions.hidden = answered && q.variant === 'permission'; // the state line says what was answered
    this.state.hidden = folded;
    this.state.textContent = q.error
      ? `Not delivered: ${q.error}`
      : q.pending
        ? 'Sending…'
        : q.answer === 'expired'
          ? 'No longer waiting for an answer.'
          : q.answer !== null
            ? `Answered: ${answerLabel(q, q.answer)}`
            : 'Waiting for you';
  }

  private toggle(): void {
    this.expanded = !this.expanded;
    this.update();
  }

  /**
   * What would run, once: the code block (or a notebook cell's diff), its length and hidden characters,
   * and every other argument in full, each hidden character shown as an escape.
   */
  private showPermission(): void {
    const q = this.item;
    const main = mainArgument(q.arguments);
    const record = q.arguments && typeof q.arguments === 'object' ? (q.arguments as Record<string, unknown>) : null;
    const diff = q.oldSource !== null && record?.action === 'replace' && typeof record.source === 'string';
    // the code shown: the one read where it runs (notebook_run), else the main argument
    const codeText = q.code || (diff ? '' : main.text);
    this.text.textContent = `Allow ${visibleText(q.toolName || 'this tool')} to run?`;
    // the server's message, unless it only quotes what the code block shows
    const quotes = !!codeText.trim() && q.question.includes(codeText.trim());
    this.detail.hidden = !q.question || quotes;
    renderVisible(this.detail, q.question);
    this.detail.title = visibleText(q.question);
    this.detail.classList.toggle('jp-mod-full', !!q.code || diff);

    this.code.hidden = !codeText;
    renderVisible(this.code, codeText);
    if (codeText) {
      this.code.setAttribute('aria-label', q.code ? 'Code that will run' : main.name || 'arguments');
    }
    this.diffBox.hidden = !diff;
    this.diffBox.textContent = '';
    const described = diff ? String(record?.source) : codeText;
    if (diff) {
      const after = String(record?.source);
      this.diffBox.append(
        h('div', { class: 'jp-Astro-question-meta', text: `Cell now → after the edit: ${diffSummary(q.oldSource ?? '', after)}` }),
        renderDiff(q.oldSource ?? '', after, 'jp-Astro-question-diff')
      );
    }
    const hidden = countHidden(described);
    const lines = described.split('\n').length;
    const what = q.code ? 'Code that will run' : diff ? 'New source' : main.name;
    this.codeHead.hidden = !described;
    this.codeHead.textContent = [
      what,
      lines > 1 ? `${lines} lines` : '',
      `${described.length.toLocaleString()} character${described.length === 1 ? '' : 's'}`,
      hidden ? `${hidden} hidden character${hidden === 1 ? '' : 's'} shown as escapes` : ''
    ]
      .filter(Boolean)
      .join(' \u00b7 ');
    this.codeHead.classList.toggle('jp-mod-warn', hidden > 0);

    // every other argument, in full
    this.rest.textContent = '';
    const shownName = diff ? 'source' : q.code ? '' : main.name;
    const others = record ? Object.entries(record).filter(([k]) => k !== shownName) : [];
    if (!record && !codeText && q.arguments !== null && q.arguments !== undefined) {
      others.push(['arguments', q.arguments]);
    }
    for (const [name, value] of others) {
      const dd = h('dd', { class: 'jp-Astro-question-arg' });
      renderVisible(dd, typeof value === 'string' ? value : prettyJSON(value));
      this.rest.append(h('dt', { text: visibleText(name) }), dd);
    }
    this.rest.hidden = others.length === 0;
  }
}
