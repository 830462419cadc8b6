/**
 * One view class per timeline item kind. Each builds its DOM once and updates it in place
 * (no layout jumps while streaming); server text goes in through textContent, except the
 * assistant's Markdown, which goes through JupyterLab's rendermime (sanitised, math typeset).
 */
import { IRenderMimeRegistry, MimeModel } from '@jupyterlab/rendermime';
import { IRenderMime } from '@jupyterlab/rendermime-interfaces';
import { Widget } from '@lumino/widgets';

import {
  INoticeItem,
  IQuestionItem,
  ISubagentItem,
  ITextItem,
  ITodoItem,
  IToolItem,
  IUserItem,
  TimelineItem
} from '../timeline';
import { button, formatBytes, formatDuration, h, prettyJSON } from './dom';

/** Outputs longer than this are cut, with a "Show more" button. */
export const COLLAPSE_CHARS = 10 * 1024;
/** How often a streaming Markdown block is re-rendered at most. */
const STREAM_RENDER_MS = 120;

export interface IRenderContext {
  rendermime: IRenderMimeRegistry | null;
  answer(requestId: string, answer: string): void;
  openPath(path: string): void;
}

export abstract class ItemView<T extends TimelineItem = TimelineItem> {
  readonly el: HTMLElement;
  /** Where child items go (subagents only). */
  childrenHost: HTMLElement | null = null;
  /** Where the subagents a tool call started are shown (tool cards only). */
  subagentHost: HTMLElement | null = null;
  rendered = -1;

  constructor(readonly item: T, protected ctx: IRenderContext) {
    this.el = this.build();
    this.el.dataset.key = item.key;
    if (item.messageId !== undefined) {
      this.el.dataset.messageId = String(item.messageId);
    }
  }

  protected abstract build(): HTMLElement;
  abstract update(): void;
  dispose(): void {
    // views holding widgets override this
  }
}

class UserView extends ItemView<IUserItem> {
  protected build(): HTMLElement {
    return h('div', { class: 'jp-Astro-item jp-Astro-user', role: 'article', 'aria-label': 'Your message' });
  }
  update(): void {
    this.el.textContent = this.item.text;
  }
}

class TextView extends ItemView<ITextItem> {
  private renderer: IRenderMime.IRenderer | null = null;
  private host!: HTMLElement;
  private renderedText = '';
  private busy = false;
  private timer: number | null = null;
  private lastRender = 0;

  protected build(): HTMLElement {
    if (this.item.kind === 'thinking') {
      this.host = h('pre', { class: 'jp-Astro-thinking-text' });
      return h(
        'details',
        { class: 'jp-Astro-item jp-Astro-thinking' },
        h('summary', { text: 'Thinking' }),
        this.host
      );
    }
    this.host = h('div', { class: 'jp-Astro-markdown' });
    return h('div', { class: 'jp-Astro-item jp-Astro-assistant', role: 'article', 'aria-label': 'Assistant' }, this.host);
  }

  update(): void {
    this.el.classList.toggle('jp-mod-streaming', this.item.streaming);
    if (this.item.text !== this.renderedText || this.item.streaming) {
      this.el.dataset.pending = 'true';
    }
    if (this.item.kind === 'thinking') {
      this.host.textContent = this.item.text;
      this.renderedText = this.item.text;
      if (!this.item.streaming) {
        delete this.el.dataset.pending;
      }
      return;
    }
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
          if (this.host.isConnected) {
            Widget.attach(this.renderer, this.host);
          } else {
            this.host.appendChild(this.renderer.node);
          }
        }
        // Hold the height while the new HTML replaces the old: no jump while streaming.
        this.host.style.minHeight = `${this.host.offsetHeight}px`;
        await this.renderer.renderModel(
          new MimeModel({ data: { 'text/markdown': text }, trusted: false })
        );
        this.host.style.minHeight = '';
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

  dispose(): void {
    if (this.timer !== null) {
      window.clearTimeout(this.timer);
    }
    if (this.renderer?.isAttached) {
      Widget.detach(this.renderer);
    }
    this.renderer?.dispose();
  }
}

const STATUS_LABEL: Record<string, string> = {
  running: 'running',
  done: 'done',
  error: 'error',
  interrupted: 'interrupted'
};

class ToolView extends ItemView<IToolItem> {
  private name!: HTMLElement;
  private statusEl!: HTMLElement;
  private duration!: HTMLElement;
  private args!: HTMLPreElement;
  private argsText = '';
  private progress!: HTMLElement;
  private progressBar!: HTMLProgressElement;
  private progressText!: HTMLElement;
  private result!: HTMLElement;
  private output!: HTMLPreElement;
  private more!: HTMLButtonElement;
  private link!: HTMLElement;
  private shownOutput: string | null = null;
  private expanded = false;

  protected build(): HTMLElement {
    this.statusEl = h('span', { class: 'jp-Astro-tool-status', role: 'img' });
    this.name = h('span', { class: 'jp-Astro-tool-name' });
    this.duration = h('span', { class: 'jp-Astro-tool-duration' });
    this.args = h('pre', { class: 'jp-Astro-pre' });
    this.progressBar = h('progress', { class: 'jp-Astro-progress' });
    this.progressText = h('span', { class: 'jp-Astro-progress-text' });
    this.progress = h('div', { class: 'jp-Astro-tool-progress', hidden: true }, this.progressBar, this.progressText);
    this.output = h('pre', { class: 'jp-Astro-pre jp-Astro-tool-output' });
    this.more = button('Show more', () => this.toggleMore(), { class: 'jp-Astro-button jp-Astro-more', hidden: true });
    this.link = h('div', { class: 'jp-Astro-persisted', hidden: true });
    this.result = h('div', { class: 'jp-Astro-tool-result', hidden: true }, this.output, this.more, this.link);
    this.subagentHost = h('div', { class: 'jp-Astro-tool-subagents' });
    return h(
      'div',
      { class: 'jp-Astro-item jp-Astro-tool', role: 'group' },
      h('div', { class: 'jp-Astro-tool-header' }, this.statusEl, this.name, this.duration),
      h('details', { class: 'jp-Astro-tool-args' }, h('summary', { text: 'Arguments' }), this.args),
      this.progress,
      this.subagentHost,
      this.result
    );
  }

  update(): void {
    const t = this.item;
    this.el.dataset.status = t.status;
    this.el.dataset.toolCallId = t.id;
    this.el.setAttribute('aria-label', `Tool ${t.name || t.id}: ${STATUS_LABEL[t.status]}`);
    this.statusEl.setAttribute('aria-label', STATUS_LABEL[t.status]);
    this.statusEl.title = STATUS_LABEL[t.status];
    this.name.textContent = t.name || '(tool)';
    if (t.messageId !== undefined) {
      this.el.dataset.messageId = String(t.messageId);
    }
    if (t.resultMessageId !== undefined) {
      this.el.dataset.resultMessageId = String(t.resultMessageId);
    }
    const argsText = t.callSeen ? prettyJSON(t.arguments) : '';
    if (argsText !== this.argsText) {
      this.argsText = argsText;
      this.args.textContent = argsText;
    }
    if (t.progress && !t.result) {
      this.progress.hidden = false;
      const { done, total, message } = t.progress;
      if (typeof total === 'number' && total > 0 && typeof done === 'number') {
        this.progressBar.max = total;
        this.progressBar.value = done;
      } else {
        this.progressBar.removeAttribute('value');
      }
      const count = typeof total === 'number' && typeof done === 'number' ? `${done}/${total}` : '';
      this.progressText.textContent = [count, message ?? ''].filter(Boolean).join(' ');
    } else {
      this.progress.hidden = true;
    }
    if (t.result) {
      this.result.hidden = false;
      this.result.classList.toggle('jp-mod-error', t.result.isError);
      this.duration.textContent = formatDuration(t.result.durationMs);
      this.showOutput(t.result.output);
      const persisted = t.result.metadata?.persisted_path;
      if (typeof persisted === 'string' && persisted) {
        this.showPersisted(persisted);
      }
    } else {
      this.duration.textContent = t.status === 'running' ? 'running…' : '';
    }
  }

  private showOutput(output: string): void {
    if (output === this.shownOutput) {
      return;
    }
    this.shownOutput = output;
    const long = output.length > COLLAPSE_CHARS;
    this.more.hidden = !long;
    this.expanded = false;
    this.output.textContent = long ? output.slice(0, COLLAPSE_CHARS) + '…' : output;
    this.more.textContent = long ? `Show more (${formatBytes(output.length)})` : 'Show more';
    this.more.setAttribute('aria-expanded', 'false');
  }

  private toggleMore(): void {
    const output = this.shownOutput ?? '';
    this.expanded = !this.expanded;
    if (this.expanded) {
      fillChunked(this.output, output);
    } else {
      this.output.textContent = output.slice(0, COLLAPSE_CHARS) + '…';
    }
    this.more.textContent = this.expanded ? 'Show less' : `Show more (${formatBytes(output.length)})`;
    this.more.setAttribute('aria-expanded', String(this.expanded));
  }

  private showPersisted(path: string): void {
    if (this.link.dataset.path === path) {
      return;
    }
    this.link.dataset.path = path;
    this.link.hidden = false;
    this.link.textContent = '';
    this.link.append(
      'Full output saved: ',
      button(path, () => this.ctx.openPath(path), { class: 'jp-Astro-link', title: 'Open the full output' })
    );
  }
}

/** Characters per block of an expanded long output. */
const CHUNK_CHARS = 16 * 1024;

/**
 * Put a long text into `host` as blocks of whole lines. Each block has
 * `content-visibility: auto`, so only the blocks scrolled into view are laid out: expanding a
 * 1 MB output costs about as much as a few kB (one 1 MB text node took ~0.8 s of layout).
 */
export function fillChunked(host: HTMLElement, text: string): void {
  host.textContent = '';
  const frag = document.createDocumentFragment();
  let start = 0;
  while (start < text.length) {
    let end = Math.min(text.length, start + CHUNK_CHARS);
    if (end < text.length) {
      const nl = text.lastIndexOf('\n', end);
      if (nl > start) {
        end = nl + 1;
      }
    }
    const block = document.createElement('span');
    block.className = 'jp-Astro-chunk';
    block.textContent = text.slice(start, end);
    frag.appendChild(block);
    start = end;
  }
  host.appendChild(frag);
}

class SubagentView extends ItemView<ISubagentItem> {
  private title!: HTMLElement;
  private state!: HTMLElement;
  private summary!: HTMLElement;

  protected build(): HTMLElement {
    this.title = h('span', { class: 'jp-Astro-subagent-title' });
    this.state = h('span', { class: 'jp-Astro-subagent-state' });
    this.summary = h('div', { class: 'jp-Astro-subagent-summary', hidden: true });
    this.childrenHost = h('div', { class: 'jp-Astro-subagent-children' });
    return h(
      'details',
      { class: 'jp-Astro-item jp-Astro-subagent', open: true },
      h('summary', {}, this.title, this.state),
      this.childrenHost,
      this.summary
    );
  }

  update(): void {
    const s = this.item;
    this.el.dataset.subagentId = s.id;
    this.el.dataset.phase = s.phase;
    this.title.textContent = `Subagent: ${s.task || s.id}`;
    this.state.textContent = s.phase === 'running' ? ' — running…' : s.isError ? ' — failed' : ' — done';
    this.summary.hidden = !s.summary;
    this.summary.textContent = s.summary;
  }
}

const TODO_MARK: Record<string, string> = { completed: '☑', done: '☑', in_progress: '◐', pending: '☐' };

class TodoView extends ItemView<ITodoItem> {
  private list!: HTMLElement;
  protected build(): HTMLElement {
    this.list = h('ul', { class: 'jp-Astro-todo-list' });
    return h('div', { class: 'jp-Astro-item jp-Astro-todo' }, h('div', { class: 'jp-Astro-todo-title', text: 'Plan' }), this.list);
  }
  update(): void {
    this.list.textContent = '';
    for (const todo of this.item.todos) {
      const status = String(todo.status ?? 'pending');
      const text = String(todo.content ?? todo.title ?? todo.subject ?? todo.id ?? '');
      this.list.appendChild(
        h('li', { 'data-status': status }, h('span', { class: 'jp-Astro-todo-mark', 'aria-label': status, text: TODO_MARK[status] ?? '•' }), ' ', text)
      );
    }
  }
}

class NoticeView extends ItemView<INoticeItem> {
  protected build(): HTMLElement {
    return h('div', { class: 'jp-Astro-item jp-Astro-notice', role: this.item.variant === 'error' ? 'alert' : 'note' });
  }
  update(): void {
    this.el.dataset.variant = this.item.variant;
    this.el.textContent = this.item.text;
  }
}

class QuestionView extends ItemView<IQuestionItem> {
  private text!: HTMLElement;
  private args!: HTMLPreElement;
  private actions!: HTMLElement;
  private input!: HTMLInputElement;
  private state!: HTMLElement;
  private buttons!: HTMLButtonElement[]; // set in build(), which runs before field initialisers

  protected build(): HTMLElement {
    const q = this.item;
    this.text = h('div', { class: 'jp-Astro-question-text' });
    this.args = h('pre', { class: 'jp-Astro-pre', hidden: true });
    this.actions = h('div', { class: 'jp-Astro-question-actions' });
    this.state = h('div', { class: 'jp-Astro-question-state', role: 'status' });
    const send = (answer: string) => this.ctx.answer(q.requestId, answer);
    if (q.variant === 'permission') {
      this.buttons = [
        button('Allow', () => send('allow'), { class: 'jp-Astro-button jp-mod-accept' }),
        button('Deny', () => send('deny'), { class: 'jp-Astro-button jp-mod-reject' }),
        button('Always allow for this session', () => send('always'), { class: 'jp-Astro-button' })
      ];
    } else {
      this.buttons = (q.options ?? []).map(option => button(option, () => send(option)));
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
      this.text,
      this.args,
      this.actions,
      this.state
    );
  }

  update(): void {
    const q = this.item;
    this.el.dataset.requestId = q.requestId;
    this.text.textContent = q.variant === 'permission' ? `${q.question}` : q.question;
    if (q.variant === 'permission') {
      this.args.hidden = false;
      this.args.textContent = `${q.toolName} ${prettyJSON(q.arguments)}`;
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
            : '';
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
  }
}
