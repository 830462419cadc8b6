/**
 * What every timeline item view shares: the render context the timeline hands them, the base
 * class (build the DOM once, update it in place), the chat message header and the icon button.
 */
import { IRenderMimeRegistry } from '@jupyterlab/rendermime';
import { EndAction, IEndItem, ISubagentItem, IToolItem, TimelineItem } from '../timeline';
import { formatTime, h } from './dom';
import { iconEl } from './icons';

/** Outputs longer than this are cut, with a "Show more" button. */
export const COLLAPSE_CHARS = 10 * 1024;

export interface IRenderContext {
  rendermime: IRenderMimeRegistry | null;
  answer(requestId: string, answer: string): void;
  openPath(path: string): void;
  /** Copy / insert into the active notebook / insert and run a code block. */
  code(action: 'copy' | 'insert' | 'run', text: string): void;
  /** A run's end banner button: try again, more steps, continue, switch model or a new chat. */
  continueRun(item: IEndItem, action: EndAction): void;
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
  /** The subagents shown in `subagentHost` (their summary is the call's result: said once). */
  hosted: ISubagentItem[] = [];
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
