/**
 * One view class per timeline item kind. Each builds its DOM once and updates it in place
 * (no layout jumps while streaming); server text goes in through textContent, except the
 * assistant's Markdown, which goes through JupyterLab's rendermime (sanitised, math typeset).
 * Tool lines are in toolView.ts, questions in questionView.ts, the shared base in itemView.ts.
 */
import { IRenderMimeRegistry, MimeModel } from '@jupyterlab/rendermime';
import { IRenderMime } from '@jupyterlab/rendermime-interfaces';
import { addBelowIcon, copyIcon, runIcon } from '@jupyterlab/ui-components';
import { Widget } from '@lumino/widgets';
import {
  EndAction,
  IEndItem,
  INoticeItem,
  ISubagentItem,
  ITextItem,
  ITodoItem,
  IToolItem,
  IUserItem,
  TimelineItem
} from '../timeline';
import { button, h, keyArgument, visibleText } from './dom';
import { iconEl, infoIcon, STATUS_ICON, TODO_ICON, usersIcon, warnIcon } from './icons';
import { iconButton, IRenderContext, ItemView, messageHeader } from './itemView';
import { QuestionView } from './questionView';
import { ToolView } from './toolView';

export { COLLAPSE_CHARS, iconButton, ItemView, messageHeader } from './itemView';
export type { IRenderContext } from './itemView';
export { fillChunked } from './toolView';

/** How often a streaming Markdown block is re-rendered at most. */
const STREAM_RENDER_MS = 120;

class UserView extends ItemView<IUserItem> {
  private body!: HTMLElement;
  protected build(): HTMLElement {
    this.body = h('div', { class: 'jp-Astro-user-text' });
    return h(
      'div',
      { class: 'jp-Astro-item jp-Astro-user', role: 'article', 'aria-label': 'Your message' },
      messageHeader('You', this.item.time),
      this.body
    );
  }
  update(): void {
    this.body.textContent = this.item.text;
  }
}

class TextView extends ItemView<ITextItem> {
  private renderer: IRenderMime.IRenderer | null = null;
  private host!: HTMLElement;
  private renderedText = '';
  private busy = false;
  private timer: number | null = null;
  private lastRender = 0;
  /** History waits for the viewport before its Markdown is rendered. */
  private deferred = false;

  protected build(): HTMLElement {
    if (this.item.kind === 'thinking') {
      this.host = h('pre', { class: 'jp-Astro-thinking-text' });
      return h('details', { class: 'jp-Astro-item jp-Astro-thinking' }, h('summary', { text: 'Thinking' }), this.host);
    }
    this.host = h('div', { class: 'jp-Astro-markdown' });
    return h('div', { class: 'jp-Astro-item jp-Astro-assistant', role: 'article', 'aria-label': 'Assistant' }, this.host);
  }

  update(): void {
    this.el.classList.toggle('jp-mod-streaming', this.item.streaming);
    if (this.item.kind === 'thinking') {
      this.host.textContent = this.item.text;
      this.renderedText = this.item.text;
      return;
    }
    if (!this.item.streaming && !this.renderer && this.ctx.lazy && this.ctx.rendermime && (this.item.messageId !== undefined || this.item.replayed)) {
      // History: plain text now (cheap), Markdown when it scrolls near.
      if (!this.deferred) {
        this.deferred = true;
        this.host.textContent = this.item.text;
        this.host.classList.add('jp-mod-plain');
        this.el.dataset.lazy = 'true';
        this.ctx.lazy.observe(this.el);
      }
      return;
    }
    if (this.item.text !== this.renderedText || this.item.streaming) {
      this.el.dataset.pending = 'true';
    }
    this.schedule();
  }

  visible(): void {
    if (!this.deferred) {
      return;
    }
    this.deferred = false;
    this.ctx.lazy?.unobserve(this.el);
    delete this.el.dataset.lazy;
    this.el.dataset.pending = 'true';
    this.schedule();
  }

  private schedule(): void {
    if (this.timer !== null) {
      return;
    }
    const wait = this.item.streaming ? Math.max(0, STREAM_RENDER_MS - (Date.now() - this.lastRender)) : 0;
    this.timer = window.setTimeout(() => {
      this.timer = null;
      void this.render();
    }, wait);
  }

  private async render(): Promise<void> {
    if (this.busy) {
      this.schedule();
      return;
    }
    const text = this.item.text;
    if (text === this.renderedText && (this.renderer || !this.ctx.rendermime)) {
      if (!this.item.streaming) {
        delete this.el.dataset.pending;
      }
      return;
    }
    this.busy = true;
    this.lastRender = Date.now();
    try {
      const rm = this.ctx.rendermime;
      if (!rm) {
        this.host.textContent = text;
      } else {
        if (!this.renderer) {
          this.renderer = rm.createRenderer('text/markdown');
          this.host.textContent = '';
          this.host.classList.remove('jp-mod-plain');
          if (this.host.isConnected) {
            Widget.attach(this.renderer, this.host);
          } else {
            this.host.appendChild(this.renderer.node);
          }
        }
        // Hold the height while the new HTML replaces the old: no jump while streaming.
        this.host.style.minHeight = `${this.host.offsetHeight}px`;
        await this.renderer.renderModel(new MimeModel({ data: { 'text/markdown': text }, trusted: false }));
        this.host.style.minHeight = '';
        this.decorateCode();
      }
      this.renderedText = text;
    } catch (error) {
      this.host.textContent = text;
      console.warn('astro: markdown rendering failed', error);
    } finally {
      this.busy = false;
    }
    if (this.item.text !== this.renderedText) {
      this.schedule();
    } else if (!this.item.streaming) {
      delete this.el.dataset.pending; // what is shown is final
    }
  }

  /** Copy / Insert / Run under each code block (Insert and Run when a notebook is open). */
  private decorateCode(): void {
    for (const pre of Array.from(this.host.querySelectorAll('pre'))) {
      if (pre.parentElement?.classList.contains('jp-Astro-code')) {
        continue;
      }
      const code = () => (pre.textContent ?? '').replace(/\n$/, '');
      const bar = h(
        'div',
        { class: 'jp-Astro-code-actions' },
        iconButton(copyIcon, 'Copy', 'Copy the code', () => this.ctx.code('copy', code()), 'jp-Astro-code-copy'),
        iconButton(addBelowIcon, 'Insert', 'Insert as a cell below the active cell', () => this.ctx.code('insert', code()), 'jp-Astro-code-insert'),
        iconButton(runIcon, 'Run', 'Insert below the active cell and run it', () => this.ctx.code('run', code()), 'jp-Astro-code-run')
      );
      const wrap = h('div', { class: 'jp-Astro-code' });
      pre.replaceWith(wrap);
      wrap.append(pre, bar);
      scrollsSideways(pre, 'Code, scrolls sideways');
    }
    for (const table of Array.from(this.host.querySelectorAll('table'))) {
      if (!table.parentElement?.classList.contains('jp-Astro-scroll-body')) {
        scrollsSideways(table, 'Table, scrolls sideways');
      }
    }
  }

  dispose(): void {
    if (this.timer !== null) {
      window.clearTimeout(this.timer);
    }
    if (this.deferred) {
      this.ctx.lazy?.unobserve(this.el);
    }
    if (this.renderer?.isAttached) {
      Widget.detach(this.renderer);
    }
    this.renderer?.dispose();
  }
}

/**
 * Render a little Markdown off screen once the page is idle, and throw it away. Why: the first
 * Markdown a page renders loads and sets up JupyterLab's Markdown parser, sanitizer and math
 * typesetter, one-time work of several main-thread tasks over 50 ms; done while nothing else
 * happens, it is not paid by the first answer or the first reopened session.
 */
export function warmMarkdown(rendermime: IRenderMimeRegistry): void {
  const run = (): void => {
    const renderer = rendermime.createRenderer('text/markdown');
    void renderer
      .renderModel(new MimeModel({ data: { 'text/markdown': '**M 31**, `z`, $d$ kpc\n\n- a\n\n```python\nx = 1\n```' }, trusted: false }))
      .catch(() => undefined)
      .finally(() => renderer.dispose());
  };
  const idle = (window as { requestIdleCallback?: (cb: () => void, opts?: { timeout: number }) => number }).requestIdleCallback;
  if (idle) {
    idle(run, { timeout: 10_000 });
  } else {
    window.setTimeout(run, 2000);
  }
}

/**
 * Let `el` (a table or a code block) scroll sideways instead of breaking numbers and tokens in a
 * narrow sidebar ("187.705" over "9"), with a visible cue: the edge that hides more content fades
 * (`data-overflow` on the wrapper says which: "left", "right" or both). The scrolling box is
 * focusable, so the keyboard can scroll it too.
 */
export function scrollsSideways(el: HTMLElement, label: string): HTMLElement {
  const outer = h('div', { class: 'jp-Astro-scroll' });
  el.replaceWith(outer);
  let body: HTMLElement = el;
  if (el.tagName === 'TABLE') {
    body = h('div', {});
    body.appendChild(el);
  }
  body.classList.add('jp-Astro-scroll-body');
  body.tabIndex = 0;
  body.setAttribute('role', 'region');
  body.setAttribute('aria-label', label);
  outer.appendChild(body);
  const update = (): void => {
    const sides: string[] = [];
    if (body.scrollLeft > 1) {
      sides.push('left');
    }
    if (body.scrollLeft + body.clientWidth < body.scrollWidth - 1) {
      sides.push('right');
    }
    const value = sides.join(' ');
    if ((outer.dataset.overflow ?? '') !== value) {
      if (value) {
        outer.dataset.overflow = value;
      } else {
        delete outer.dataset.overflow;
      }
    }
  };
  body.addEventListener('scroll', update, { passive: true });
  if (typeof ResizeObserver !== 'undefined') {
    new ResizeObserver(update).observe(body);
  }
  requestAnimationFrame(update);
  return outer;
}

export class SubagentView extends ItemView<ISubagentItem> {
  private title!: HTMLElement;
  private state!: HTMLElement;
  private stateIcon!: HTMLElement;
  private summary!: HTMLElement;
  private shownPhase = '';

  protected build(): HTMLElement {
    this.title = h('span', { class: 'jp-Astro-subagent-title' });
    this.stateIcon = h('span', { class: 'jp-Astro-tool-state-icon' });
    this.state = h('span', { class: 'jp-Astro-subagent-state' });
    this.summary = h('div', { class: 'jp-Astro-subagent-summary', hidden: true });
    this.childrenHost = h('div', { class: 'jp-Astro-subagent-children' });
    return h(
      'details',
      { class: 'jp-Astro-item jp-Astro-subagent', open: true },
      h('summary', {}, iconEl(usersIcon), h('span', { class: 'jp-Astro-subagent-label', text: 'Subagent' }), this.title, this.stateIcon, this.state),
      this.childrenHost,
      this.summary
    );
  }

  /** The tool call whose card this group is shown in (its line already names the task). */
  hostTool: IToolItem | null = null;

  update(): void {
    const s = this.item;
    this.el.dataset.subagentId = s.id;
    this.el.dataset.phase = s.phase;
    const task = visibleText(s.task || s.id);
    this.title.textContent = task;
    this.title.title = task;
    // shown once: the card's line already says the task
    this.title.hidden = !!this.hostTool && sameText(keyArgument(this.hostTool.arguments), s.task);
    const status = s.phase === 'running' ? 'running' : s.isError ? 'error' : 'done';
    this.el.dataset.status = status;
    if (this.shownPhase !== status) {
      this.shownPhase = status;
      this.stateIcon.textContent = '';
      this.stateIcon.appendChild(iconEl(STATUS_ICON[status]));
    }
    this.state.textContent = status === 'running' ? 'running' : status === 'error' ? 'failed' : 'done';
    const summary = unsaidSummary(s);
    this.summary.hidden = !summary;
    this.summary.textContent = summary;
  }
}

function sameText(a: string, b: string): boolean {
  const norm = (t: string) => t.replace(/\s+/g, ' ').trim();
  return !!norm(a) && norm(a) === norm(b);
}

/**
 * What the summary adds to what the group already shows: the subagent's summary is its last text
 * (shown nested above), so only an error, a cancellation or a step-limit note is left to say.
 */
export function unsaidSummary(s: ISubagentItem): string {
  const summary = s.summary.trim();
  const last = [...s.children].reverse().find(c => c.kind === 'text') as ITextItem | undefined;
  const said = last ? last.text.trim() : '';
  if (!said || !summary.startsWith(said)) {
    return summary;
  }
  return summary.slice(said.length).trim();
}

class TodoView extends ItemView<ITodoItem> {
  private list!: HTMLElement;
  private progress!: HTMLElement;
  protected build(): HTMLElement {
    this.list = h('ul', { class: 'jp-Astro-todo-list' });
    this.progress = h('span', { class: 'jp-Astro-todo-progress' });
    return h(
      'details',
      { class: 'jp-Astro-item jp-Astro-todo', open: true, 'aria-label': 'Plan' },
      h('summary', { class: 'jp-Astro-todo-title' }, h('span', { text: 'Plan' }), this.progress),
      this.list
    );
  }
  update(): void {
    this.el.toggleAttribute('data-active', this.item.active);
    this.list.textContent = '';
    let done = 0;
    for (const todo of this.item.todos) {
      const status: string = todo.status;
      if (status === 'completed') {
        done++;
      }
      const text = visibleText(todo.content || todo.id);
      this.list.appendChild(
        h(
          'li',
          { 'data-status': status },
          h('span', { class: 'jp-Astro-todo-mark', role: 'img', 'aria-label': status.replace('_', ' ') }, iconEl(TODO_ICON[status] ?? TODO_ICON.pending)),
          h('span', { class: 'jp-Astro-todo-text', text })
        )
      );
    }
    this.progress.textContent = `${done}/${this.item.todos.length}`;
  }
}

class NoticeView extends ItemView<INoticeItem> {
  private text!: HTMLElement;
  protected build(): HTMLElement {
    this.text = h('span', { class: 'jp-Astro-notice-text' });
    const variant = this.item.variant;
    if (variant === 'usage') {
      // a quiet line under the answer: what it took and cost
      return h('div', { class: 'jp-Astro-item jp-Astro-notice jp-Astro-usage', role: 'note', 'aria-label': 'Tokens and cost of this answer' }, this.text);
    }
    return h(
      'div',
      { class: 'jp-Astro-item jp-Astro-notice', role: variant === 'error' ? 'alert' : 'note' },
      iconEl(variant === 'error' ? warnIcon : infoIcon),
      this.text
    );
  }
  update(): void {
    this.el.dataset.variant = this.item.variant;
    this.el.hidden = !!this.item.hidden;
    this.text.textContent = visibleText(this.item.text);
  }
}

const END_ACTION: Record<EndAction, string> = {
  retry: 'Try again',
  more_steps: 'Continue with more steps',
  continue: 'Continue',
  switch_model: 'Switch model',
  new_chat: 'Start a new chat'
};

/** The end of a run that did not simply finish: why, and the actions that fit (primary first). */
class EndView extends ItemView<IEndItem> {
  protected build(): HTMLElement {
    const r = this.item.reason;
    const buttons = this.item.actions.map((action, i) => {
      const b = button(END_ACTION[action], () => {
        if (action !== 'switch_model') {
          buttons.forEach(other => (other.disabled = true)); // one new run per banner
        }
        this.ctx.continueRun(this.item, action);
      }, { class: `jp-Astro-button jp-Astro-end-action ${i === 0 ? 'jp-mod-accept' : 'jp-mod-secondary'}` });
      b.dataset.action = action;
      return b;
    });
    return h(
      'div',
      { class: 'jp-Astro-item jp-Astro-end', role: 'status', 'data-reason': r },
      h(
        'div',
        { class: 'jp-Astro-end-text' },
        iconEl(r === 'cancelled' ? STATUS_ICON.cancelled : warnIcon),
        h('div', {}, h('strong', { text: this.item.text }), h('div', { class: 'jp-Astro-end-hint', text: this.item.hint }))
      ),
      h('div', { class: 'jp-Astro-end-actions' }, ...buttons)
    );
  }
  update(): void {
    // static
  }
}

export function createView(item: TimelineItem, ctx: IRenderContext): ItemView {
  switch (item.kind) {
    case 'user':
      return new UserView(item, ctx);
    case 'text':
    case 'thinking':
      return new TextView(item, ctx);
    case 'tool':
      return new ToolView(item, ctx);
    case 'subagent':
      return new SubagentView(item, ctx);
    case 'todo':
      return new TodoView(item, ctx);
    case 'notice':
      return new NoticeView(item, ctx);
    case 'question':
      return new QuestionView(item, ctx);
    case 'end':
      return new EndView(item, ctx);
  }
}
