/**
 * One view class per timeline item kind. Each builds its DOM once and updates it in place
 * (no layout jumps while streaming); server text goes in through textContent, except the
 * assistant's Markdown, which goes through JupyterLab's rendermime (sanitised, math typeset).
 * Tool calls are compact lines (icon, name, key argument, status, duration) that expand.
 */
import { IRenderMimeRegistry, MimeModel } from '@jupyterlab/rendermime';
import { IRenderMime } from '@jupyterlab/rendermime-interfaces';
import { addBelowIcon, caretRightIcon, copyIcon, runIcon } from '@jupyterlab/ui-components';
import { Widget } from '@lumino/widgets';

import {
  IEndItem,
  INoticeItem,
  IQuestionItem,
  ISubagentItem,
  ITextItem,
  ITodoItem,
  IToolItem,
  IUserItem,
  TimelineItem,
  ToolStatus
} from '../timeline';
import {
  button,
  countHidden,
  formatBytes,
  formatDuration,
  formatTime,
  h,
  keyArgument,
  prettyJSON,
  renderVisible,
  visibleText
} from './dom';
import { IProgressInfo } from '../tokens';
import { iconEl, infoIcon, STATUS_ICON, TODO_ICON, toolIcon, usersIcon, warnIcon } from './icons';

/** Outputs longer than this are cut, with a "Show more" button. */
export const COLLAPSE_CHARS = 10 * 1024;
/** How often a streaming Markdown block is re-rendered at most. */
const STREAM_RENDER_MS = 120;

export interface IRenderContext {
  rendermime: IRenderMimeRegistry | null;
  answer(requestId: string, answer: string): void;
  openPath(path: string): void;
  /** Copy / insert into the active notebook / insert and run a code block. */
  code(action: 'copy' | 'insert' | 'run', text: string): void;
  /** Continue the session after a run that stopped (step limit, cancel, error). */
  continueRun(item: IEndItem): void;
  /** Tool lines start expanded (a setting). */
  expandTools(): boolean;
  /** Renders history Markdown when near the viewport (null: at once). */
  lazy: IntersectionObserver | null;
  /** Adds to a tool line what its tool touched (the notebook cell of notebook tools). */
  decorateTool?(tool: IToolItem, el: HTMLElement): void;
}

export abstract class ItemView<T extends TimelineItem = TimelineItem> {
  readonly el: HTMLElement;
  /** Where child items go (subagents only). */
  childrenHost: HTMLElement | null = null;
  /** Where the subagents a tool call started are shown (tool lines only). */
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
  /** Called by the lazy observer when the item comes near the viewport. */
  visible(): void {
    // views with deferred work override this
  }
  dispose(): void {
    // views holding widgets override this
  }
}

/** The "You · 21:04" / "Astro · 21:04" line above a chat message. */
export function messageHeader(who: 'You' | 'Astro', time: number | undefined): HTMLElement {
  const when = formatTime(time);
  return h(
    'div',
    { class: 'jp-Astro-msg-header' },
    h('span', { class: 'jp-Astro-msg-who', text: who }),
    when ? h('time', { class: 'jp-Astro-msg-time', text: when, datetime: new Date(time ?? 0).toISOString() }) : null
  );
}

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

/** A small button: an SVG icon and a short label (the label is hidden when narrow). */
export function iconButton(
  icon: Parameters<typeof iconEl>[0],
  label: string,
  title: string,
  onClick: () => void,
  className = ''
): HTMLButtonElement {
  const b = h(
    'button',
    { type: 'button', class: `jp-Astro-icon-button ${className}`.trim(), title },
    iconEl(icon),
    h('span', { class: 'jp-Astro-icon-label', text: label })
  );
  b.addEventListener('click', onClick);
  return b;
}

const STATUS_LABEL: Record<ToolStatus, string> = {
  running: 'running',
  waiting: 'waiting for you',
  done: 'done',
  error: 'failed',
  cancelled: 'cancelled',
  interrupted: 'interrupted'
};

/** The status a group of identical calls shows: the most urgent of its members. */
function groupStatus(members: IToolItem[]): ToolStatus {
  const has = (s: ToolStatus) => members.some(m => m.status === s);
  for (const s of ['waiting', 'running', 'cancelled', 'interrupted'] as ToolStatus[]) {
    if (has(s)) {
      return s;
    }
  }
  return members.every(m => m.status === 'error') ? 'error' : members[members.length - 1].status;
}

class ToolView extends ItemView<IToolItem> {
  private line!: HTMLButtonElement;
  private familyIcon!: HTMLElement;
  private name!: HTMLElement;
  private keyArg!: HTMLElement;
  private count!: HTMLElement;
  private statusIcon!: HTMLElement;
  private statusText!: HTMLElement;
  private duration!: HTMLElement;
  private body: HTMLElement | null = null;
  private shownIcon = '';
  private shownStatus = '';
  private expanded = false;

  // built with the body, on first expand
  private groupNote!: HTMLElement;
  private args!: HTMLPreElement;
  private argsMeta!: HTMLElement;
  private argsText: string | null = null;
  private progress!: HTMLElement;
  private progressBar!: HTMLProgressElement;
  private progressText!: HTMLElement;
  private result!: HTMLElement;
  private output!: HTMLPreElement;
  private more!: HTMLButtonElement;
  private link!: HTMLElement;
  private shownOutput: string | null = null;
  private outputExpanded = false;

  protected build(): HTMLElement {
    this.familyIcon = h('span', { class: 'jp-Astro-tool-icon' });
    this.name = h('span', { class: 'jp-Astro-tool-name' });
    this.keyArg = h('span', { class: 'jp-Astro-tool-key' });
    this.count = h('span', { class: 'jp-Astro-tool-count', hidden: true });
    this.statusIcon = h('span', { class: 'jp-Astro-tool-state-icon' });
    this.statusText = h('span', { class: 'jp-Astro-tool-state' });
    this.duration = h('span', { class: 'jp-Astro-tool-duration' });
    this.line = h(
      'button',
      { type: 'button', class: 'jp-Astro-tool-line', 'aria-expanded': 'false' },
      iconEl(caretRightIcon, 'jp-Astro-caret'),
      this.familyIcon,
      this.name,
      this.keyArg,
      this.count,
      this.statusIcon,
      this.statusText,
      this.duration
    );
    this.line.addEventListener('click', () => this.toggle());
    this.subagentHost = h('div', { class: 'jp-Astro-tool-subagents' });
    return h('div', { class: 'jp-Astro-item jp-Astro-tool', role: 'group' }, this.line, this.subagentHost);
  }

  constructor(item: IToolItem, ctx: IRenderContext) {
    super(item, ctx);
    // after the field initialisers (build() runs before them)
    if (ctx.expandTools()) {
      this.toggle(true);
    }
  }

  private ensureBody(el: HTMLElement = this.el): HTMLElement {
    if (this.body) {
      return this.body;
    }
    this.groupNote = h('div', { class: 'jp-Astro-tool-group-note', hidden: true });
    this.args = h('pre', { class: 'jp-Astro-pre jp-Astro-tool-args-text' });
    this.argsMeta = h('div', { class: 'jp-Astro-tool-args-meta' });
    this.progressBar = h('progress', { class: 'jp-Astro-progress' });
    this.progressText = h('span', { class: 'jp-Astro-progress-text' });
    this.progress = h('div', { class: 'jp-Astro-tool-progress', hidden: true }, this.progressBar, this.progressText);
    this.output = h('pre', { class: 'jp-Astro-pre jp-Astro-tool-output' });
    this.more = button('Show more', () => this.toggleMore(), { class: 'jp-Astro-button jp-Astro-more', hidden: true });
    this.link = h('div', { class: 'jp-Astro-persisted', hidden: true });
    this.result = h('div', { class: 'jp-Astro-tool-result', hidden: true }, h('div', { class: 'jp-Astro-tool-section', text: 'Result' }), this.output, this.more, this.link);
    this.body = h(
      'div',
      { class: 'jp-Astro-tool-body' },
      this.groupNote,
      h('div', { class: 'jp-Astro-tool-args' }, h('div', { class: 'jp-Astro-tool-section', text: 'Arguments' }), this.args, this.argsMeta),
      this.progress,
      this.result
    );
    el.insertBefore(this.body, this.subagentHost);
    return this.body;
  }

  /** Open or close the details of this line. */
  toggle(open = !this.expanded): void {
    this.expanded = open;
    this.line.setAttribute('aria-expanded', String(open));
    if (open) {
      this.ensureBody();
      this.body!.hidden = false;
      this.fillBody();
    } else if (this.body) {
      this.body.hidden = true;
    }
  }

  update(): void {
    const t = this.item;
    const members = [t, ...t.repeats];
    const status = t.repeats.length ? groupStatus(members) : t.status;
    this.el.dataset.status = status;
    this.el.dataset.toolCallId = t.id;
    if (t.repeatOf) {
      this.el.dataset.repeatOf = t.repeatOf.id;
      this.el.hidden = true; // shown on its head's line
    }
    const name = t.name || '(tool)';
    const key = t.callSeen ? visibleText(keyArgument(t.arguments)).replace(/\s+/g, ' ').trim() : '';
    if (this.shownIcon !== name) {
      this.shownIcon = name;
      this.familyIcon.textContent = '';
      this.familyIcon.appendChild(iconEl(toolIcon(name)));
    }
    this.name.textContent = name;
    this.keyArg.textContent = key;
    this.keyArg.title = key;
    this.count.hidden = t.repeats.length === 0;
    this.count.textContent = `\u00d7${members.length}`;
    if (this.shownStatus !== status) {
      this.shownStatus = status;
      this.statusIcon.textContent = '';
      this.statusIcon.appendChild(iconEl(STATUS_ICON[status]));
    }
    const failed = members.filter(m => m.status === 'error').length;
    const progress = !t.result && t.progress ? progressLabel(t.progress) : '';
    this.statusText.textContent =
      status === 'done' ? '' : status === 'running' && progress ? progress : status === 'error' && t.repeats.length && failed < members.length ? `${failed} failed` : STATUS_LABEL[status];
    const total = members.reduce((sum, m) => sum + (m.result?.durationMs ?? 0), 0);
    const anyDuration = members.some(m => m.result?.durationMs !== null && m.result?.durationMs !== undefined);
    this.duration.textContent = anyDuration ? formatDuration(total) : '';
    this.line.setAttribute(
      'aria-label',
      `${name}${key ? ' ' + key : ''}${t.repeats.length ? `, ${members.length} identical calls` : ''}: ${STATUS_LABEL[status]}${this.duration.textContent ? ', ' + this.duration.textContent : ''}`
    );
    if (t.messageId !== undefined) {
      this.el.dataset.messageId = String(t.messageId);
    }
    if (t.resultMessageId !== undefined) {
      this.el.dataset.resultMessageId = String(t.resultMessageId);
    }
    if (this.expanded) {
      this.fillBody();
    }
    this.ctx.decorateTool?.(t, this.el);
  }

  private fillBody(): void {
    const t = this.item;
    const members = [t, ...t.repeats];
    const last = members[members.length - 1];
    if (t.repeats.length) {
      const failed = members.filter(m => m.status === 'error').length;
      this.groupNote.hidden = false;
      this.groupNote.textContent = `${members.length} identical calls in a row${failed ? `, ${failed} failed` : ''}. Showing the latest result.`;
    }
    const argsText = t.callSeen ? prettyJSON(t.arguments) : '';
    if (argsText !== this.argsText) {
      this.argsText = argsText;
      renderVisible(this.args, argsText);
      const hidden = countHidden(argsText);
      this.argsMeta.textContent = hidden ? `${hidden} hidden character${hidden === 1 ? '' : 's'} shown as escapes` : '';
      this.argsMeta.hidden = !hidden;
    }
    const shown = last.result ? last : t;
    if (shown.progress && !shown.result) {
      this.progress.hidden = false;
      const { done, total } = shown.progress;
      if (typeof total === 'number' && total > 0 && typeof done === 'number') {
        this.progressBar.max = total;
        this.progressBar.value = done;
      } else {
        this.progressBar.removeAttribute('value');
      }
      this.progressText.textContent = progressLabel(shown.progress);
    } else {
      this.progress.hidden = true;
    }
    if (shown.result) {
      this.result.hidden = false;
      this.result.classList.toggle('jp-mod-error', shown.result.isError);
      this.showOutput(shown.result.output);
      const persisted = shown.result.metadata?.persisted_path;
      if (typeof persisted === 'string' && persisted) {
        this.showPersisted(persisted);
      }
    }
  }

  private showOutput(output: string): void {
    if (output === this.shownOutput) {
      return;
    }
    this.shownOutput = output;
    const long = output.length > COLLAPSE_CHARS;
    this.more.hidden = !long;
    this.outputExpanded = false;
    this.output.textContent = long ? output.slice(0, COLLAPSE_CHARS) + '…' : output;
    this.more.textContent = long ? `Show more (${formatBytes(output.length)})` : 'Show more';
    this.more.setAttribute('aria-expanded', 'false');
  }

  private toggleMore(): void {
    const output = this.shownOutput ?? '';
    this.outputExpanded = !this.outputExpanded;
    if (this.outputExpanded) {
      fillChunked(this.output, output);
    } else {
      this.output.textContent = output.slice(0, COLLAPSE_CHARS) + '…';
    }
    this.more.textContent = this.outputExpanded ? 'Show less' : `Show more (${formatBytes(output.length)})`;
    this.more.setAttribute('aria-expanded', String(this.outputExpanded));
  }

  private showPersisted(path: string): void {
    if (this.link.dataset.path === path) {
      return;
    }
    this.link.dataset.path = path;
    this.link.hidden = false;
    this.link.textContent = '';
    this.link.append('Full output saved: ', button(path, () => this.ctx.openPath(path), { class: 'jp-Astro-link', title: 'Open the full output' }));
  }
}

function progressLabel(p: IProgressInfo): string {
  const count = typeof p.total === 'number' && typeof p.done === 'number' ? `${p.done}/${p.total}` : '';
  return [count, p.message ? visibleText(p.message) : ''].filter(Boolean).join(' ');
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

  update(): void {
    const s = this.item;
    this.el.dataset.subagentId = s.id;
    this.el.dataset.phase = s.phase;
    const task = visibleText(s.task || s.id);
    this.title.textContent = task;
    this.title.title = task;
    const status = s.phase === 'running' ? 'running' : s.isError ? 'error' : 'done';
    this.el.dataset.status = status;
    if (this.shownPhase !== status) {
      this.shownPhase = status;
      this.stateIcon.textContent = '';
      this.stateIcon.appendChild(iconEl(STATUS_ICON[status]));
    }
    this.state.textContent = status === 'running' ? 'running' : status === 'error' ? 'failed' : 'done';
    this.summary.hidden = !s.summary;
    this.summary.textContent = s.summary;
  }
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
    return h(
      'div',
      { class: 'jp-Astro-item jp-Astro-notice', role: this.item.variant === 'error' ? 'alert' : 'note' },
      iconEl(this.item.variant === 'error' ? warnIcon : infoIcon),
      this.text
    );
  }
  update(): void {
    this.el.dataset.variant = this.item.variant;
    this.text.textContent = visibleText(this.item.text);
  }
}

const END_ACTION: Record<IEndItem['reason'], string> = {
  max_steps: 'Continue with more steps',
  cancelled: 'Continue',
  error: 'Try again'
};

const END_HINT: Record<IEndItem['reason'], string> = {
  max_steps: 'The agent used all the steps it was given for this run.',
  cancelled: 'You stopped the run; what it did so far is kept.',
  error: 'Something went wrong; the messages above say what.'
};

/** The end of a run that did not simply finish: a banner and what to do next. */
class EndView extends ItemView<IEndItem> {
  private action!: HTMLButtonElement;
  protected build(): HTMLElement {
    const r = this.item.reason;
    this.action = button(END_ACTION[r], () => {
      this.action.disabled = true;
      this.ctx.continueRun(this.item);
    }, { class: 'jp-Astro-button jp-mod-accept jp-Astro-end-action' });
    return h(
      'div',
      { class: 'jp-Astro-item jp-Astro-end', role: 'status', 'data-reason': r },
      h(
        'div',
        { class: 'jp-Astro-end-text' },
        iconEl(r === 'cancelled' ? STATUS_ICON.cancelled : warnIcon),
        h('div', {}, h('strong', { text: this.item.text }), h('div', { class: 'jp-Astro-end-hint', text: END_HINT[r] }))
      ),
      h('div', { class: 'jp-Astro-end-actions' }, this.action)
    );
  }
  update(): void {
    // static
  }
}

class QuestionView extends ItemView<IQuestionItem> {
  private text!: HTMLElement;
  private detail!: HTMLElement;
  private what!: HTMLElement;
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
