/**
 * A tool call as a compact line (icon, name, key argument, status, duration) that expands to
 * its arguments, progress and output; identical consecutive calls show as one line with a count.
 */
import { caretRightIcon } from '@jupyterlab/ui-components';
import { IToolItem, ToolStatus, toolLabel } from '../timeline';
import {
  button,
  countHidden,
  formatBytes,
  formatDuration,
  h,
  keyArgument,
  prettyJSON,
  renderVisible,
  visibleText
} from './dom';
import { IProgressInfo } from '../tokens';
import { catalogOf, renderCatalog } from './catalogView';
import { apiUrl } from '../handler';
import { skyCell } from '../sky';
import { iconEl, STATUS_ICON, toolIcon } from './icons';
import { COLLAPSE_CHARS, IRenderContext, ItemView } from './itemView';

const STATUS_LABEL: Record<ToolStatus, string> = {
  running: 'running',
  waiting: 'waiting for you',
  done: 'done',
  error: 'failed',
  cancelled: 'cancelled',
  interrupted: 'interrupted',
  declined: 'declined'
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

export class ToolView extends ItemView<IToolItem> {
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
  private skyButton: HTMLButtonElement | null = null;

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
    const label = toolLabel(name);
    this.name.textContent = label.server ? `${label.tool} \u00b7 ${label.server}` : name;
    this.name.title = label.server ? `${label.tool}: a tool of the MCP server ${label.server}` : '';
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
    this.offerSky();
    this.ctx.decorateTool?.(t, this.el);
  }

  /** "Show on sky" under a resolved target or a positional catalog result: inserts and runs the `%astro sky`
   * cell in the active notebook. */
  private offerSky(): void {
    const cell = skyCell(this.item);
    if (cell === null || this.skyButton) {
      return;
    }
    this.skyButton = button('Show on sky', () => this.ctx.code('run', cell), {
      class: 'jp-Astro-button jp-Astro-sky',
      title: `Insert \u201c${cell.split('\n').pop()}\u201d below the active cell and run it`
    });
    this.el.insertBefore(this.skyButton, this.subagentHost);
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
      // a subagent's result is its summary, already shown in its group below the line
      const output = shown.result.output.trim();
      this.result.hidden = !!output && this.hosted.some(s => s.summary.trim() === output);
      this.result.classList.toggle('jp-mod-error', shown.result.isError);
      this.showOutput(shown.result.output);
      const persisted = shown.result.metadata?.persisted_path;
      if (typeof persisted === 'string' && persisted) {
        this.showPersisted(persisted);
      }
      this.showCatalog(shown.result.isError ? undefined : shown.result.metadata);
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

  /** A catalog result's table and download links (once per result id). */
  private showCatalog(metadata: Record<string, unknown> | undefined): void {
    const cat = catalogOf(metadata);
    const old = this.result.querySelector('.jp-Astro-catalog') as HTMLElement | null;
    if (old && (!cat || old.dataset.resultId !== cat.result_id)) {
      old.remove();
    } else if (old) {
      return;
    }
    if (cat) {
      this.result.insertBefore(
        renderCatalog(cat, (id, format) => apiUrl(`api/catalog-results/${encodeURIComponent(id)}?format=${format}`)),
        this.output
      );
    }
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
