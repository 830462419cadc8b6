/** A question the run asks: an `ask_user` question or a permission request, answered in place. */
import { IQuestionItem } from '../timeline';
import {
  button,
  countHidden,
  h,
  keyArgument,
  prettyJSON,
  renderVisible,
  visibleText
} from './dom';
import { iconEl, STATUS_ICON } from './icons';
import { ItemView } from './itemView';

export class QuestionView extends ItemView<IQuestionItem> {
  private text!: HTMLElement;
  private detail!: HTMLElement;
  private what!: HTMLElement;
  private codeHead!: HTMLElement;
  private code!: HTMLPreElement;
  private args!: HTMLPreElement;
  private meta!: HTMLElement;
  private rest!: HTMLPreElement;
  private actions!: HTMLElement;
  private input!: HTMLInputElement;
  private state!: HTMLElement;
  private buttons!: HTMLButtonElement[]; // set in build(), which runs before field initialisers
  private shownArgs: unknown = undefined;

  protected build(): HTMLElement {
    const q = this.item;
    this.text = h('div', { class: 'jp-Astro-question-text' });
    this.detail = h('div', { class: 'jp-Astro-question-detail', hidden: true });
    this.what = h('div', { class: 'jp-Astro-question-what', hidden: true });
    this.codeHead = h('div', { class: 'jp-Astro-question-what jp-Astro-question-codehead', hidden: true });
    this.code = h('pre', { class: 'jp-Astro-pre jp-Astro-question-code', hidden: true });
    this.args = h('pre', { class: 'jp-Astro-pre jp-Astro-question-command', hidden: true });
    this.meta = h('div', { class: 'jp-Astro-question-meta', hidden: true });
    this.rest = h('pre', { class: 'jp-Astro-pre jp-Astro-question-args', hidden: true });
    this.actions = h('div', { class: 'jp-Astro-question-actions' });
    this.state = h('div', { class: 'jp-Astro-question-state', role: 'status' });
    const send = (answer: string) => this.ctx.answer(q.requestId, answer);
    if (q.variant === 'permission') {
      this.buttons = [
        button('Allow', () => send('allow'), { class: 'jp-Astro-button jp-mod-accept' }),
        button('Deny', () => send('deny'), { class: 'jp-Astro-button jp-mod-reject' }),
        // notebook tools: the server scopes "always" to the notebook (docs/notebook-bridge.md)
        button(/^notebook_(edit|run)$/.test(q.toolName) ? 'Allow for this notebook' : 'Always allow for this session', () => send('always'), { class: 'jp-Astro-button' })
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
    return h(
      'div',
      {
        class: `jp-Astro-item jp-Astro-question jp-Astro-${q.variant}`,
        role: 'group',
        'aria-label': q.variant === 'permission' ? 'Permission request' : 'Question from the agent'
      },
      h('div', { class: 'jp-Astro-question-head' }, iconEl(STATUS_ICON.waiting), this.text),
      this.detail,
      this.codeHead,
      this.code,
      this.what,
      this.args,
      this.meta,
      this.rest,
      this.actions,
      this.state
    );
  }

  update(): void {
    const q = this.item;
    this.el.dataset.requestId = q.requestId;
    if (q.variant === 'permission') {
      // A short question; the server's message (which may quote the command) below it, and
      // the whole command, escaped, below that.
      this.text.textContent = `Allow ${visibleText(q.toolName || 'this tool')} to run?`;
      this.detail.hidden = !q.question;
      renderVisible(this.detail, q.question);
      this.detail.title = visibleText(q.question);
      // the code that will run, read where it runs (a notebook cell): in full, with its line breaks
      this.detail.classList.toggle('jp-mod-full', !!q.code);
      this.codeHead.hidden = this.code.hidden = !q.code;
      if (q.code && this.code.dataset.shown !== q.code) {
        const lines = q.code.split('\n').length;
        this.codeHead.textContent = `Code that will run (${lines} line${lines === 1 ? '' : 's'})`;
        renderVisible(this.code, q.code);
        this.code.dataset.shown = q.code;
      }
    } else {
      renderVisible(this.text, q.question);
    }
    if (q.variant === 'permission' && this.shownArgs !== q.arguments) {
      this.shownArgs = q.arguments;
      this.showArguments(q.toolName, q.arguments);
    }
    const closed = q.answer !== null || q.pending;
    for (const b of this.buttons) {
      b.disabled = closed;
    }
    if (this.input) {
      this.input.disabled = closed;
    }
    this.el.classList.toggle('jp-mod-answered', q.answer !== null && !q.pending);
    this.state.textContent = q.error
      ? `Not delivered: ${q.error}`
      : q.pending
        ? 'Sending…'
        : q.answer === 'expired'
          ? 'No longer waiting for an answer.'
          : q.answer !== null
            ? `Answered: ${q.answer === 'always' ? 'always allow for this session' : q.answer}`
            : 'Waiting for you';
  }

  /**
   * The whole of what would run, every hidden character shown as an escape, with its length:
   * the key argument (the command) on its own, then any other arguments as JSON.
   */
  private showArguments(toolName: string, args: unknown): void {
    const record = args && typeof args === 'object' ? (args as Record<string, unknown>) : null;
    const key = keyArgument(args);
    const keyName = record ? Object.keys(record).find(k => record[k] === key) ?? '' : '';
    const main = key || prettyJSON(args);
    this.what.hidden = false;
    this.what.textContent = `${toolName}${keyName ? ` \u00b7 ${keyName}` : ''}`;
    this.args.hidden = false;
    renderVisible(this.args, main);
    const hidden = countHidden(main);
    const lines = main.split('\n').length;
    this.meta.hidden = false;
    this.meta.textContent = [
      `${main.length.toLocaleString()} character${main.length === 1 ? '' : 's'}`,
      lines > 1 ? `${lines} lines` : '',
      hidden ? `${hidden} hidden character${hidden === 1 ? '' : 's'} shown as escapes` : ''
    ]
      .filter(Boolean)
      .join(' \u00b7 ');
    this.meta.classList.toggle('jp-mod-warn', hidden > 0);
    if (record && key && keyName) {
      const others = Object.fromEntries(Object.entries(record).filter(([k]) => k !== keyName));
      if (Object.keys(others).length) {
        this.rest.hidden = false;
        renderVisible(this.rest, prettyJSON(others));
      }
    }
  }
}
