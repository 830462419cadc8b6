/**
 * TimelineView: renders a TimelineModel. Changes are queued and applied once per animation
 * frame, so a burst of hundreds of events costs one layout; the view sticks to the bottom
 * while the user is there and leaves the scroll position alone when they scrolled up.
 */
import { Message } from '@lumino/messaging';
import { Widget } from '@lumino/widgets';

import { ISubagentItem, TimelineChange, TimelineItem, TimelineModel } from '../timeline';
import { createView, IRenderContext, ItemView } from './items';

const STICK_PX = 48;
/** A scroll within this long after a wheel/touch/key/pointer event counts as the user's. */
const USER_SCROLL_MS = 1000;

export class TimelineView extends Widget {
  private views = new Map<string, ItemView>();
  private added: Array<{ item: TimelineItem }> = [];
  private dirty = new Set<TimelineItem>();
  private frame: number | null = null;
  private needsReset = false;
  private stuck = true;
  private userIntentAt = 0;
  private resizeObserver: ResizeObserver | null = null;
  private list: HTMLElement;
  private empty: HTMLElement;

  constructor(readonly model: TimelineModel, private ctx: IRenderContext) {
    super();
    this.addClass('jp-Astro-timeline');
    this.node.setAttribute('role', 'log');
    this.node.setAttribute('aria-live', 'polite');
    this.node.setAttribute('aria-label', 'Agent timeline');
    this.node.tabIndex = 0;
    this.empty = document.createElement('div');
    this.empty.className = 'jp-Astro-empty';
    this.empty.textContent = 'Ask about a target, a paper, or your data. Enter sends, Shift+Enter adds a line.';
    this.list = document.createElement('div');
    this.list.className = 'jp-Astro-timeline-list';
    this.node.append(this.empty, this.list);
    model.changed.connect(this.onChange, this);
    // Follow the bottom while the user is there: a scroll by the user decides, and content that
    // grows later (Markdown renders asynchronously) keeps the view pinned.
    // Only a scroll the user asked for (wheel, touch, keys, scrollbar) unpins the view: layout
    // changes (a re-rendered block, the header wrapping) also move scrollTop, and must not.
    for (const type of ['wheel', 'touchstart', 'keydown', 'pointerdown']) {
      this.node.addEventListener(type, () => (this.userIntentAt = Date.now()), { passive: true });
    }
    this.node.addEventListener('scroll', () => {
      const atBottom = this.node.scrollHeight - this.node.scrollTop - this.node.clientHeight < STICK_PX;
      if (atBottom) {
        this.stuck = true;
      } else if (Date.now() - this.userIntentAt < USER_SCROLL_MS) {
        this.stuck = false;
      }
    });
    if (typeof ResizeObserver !== 'undefined') {
      this.resizeObserver = new ResizeObserver(() => {
        if (this.stuck) {
          this.node.scrollTop = this.node.scrollHeight;
        }
      });
      this.resizeObserver.observe(this.list);
      this.resizeObserver.observe(this.node);
    }
  }

  /** Apply pending changes now (tests and scroll-to-message need the DOM up to date). */
  flush(): void {
    if (this.frame !== null) {
      cancelAnimationFrame(this.frame);
      this.frame = null;
    }
    const stick = this.stuck;
    if (this.needsReset) {
      this.needsReset = false;
      this.added = [];
      this.dirty.clear();
      this.rebuild();
    } else {
      for (const { item } of this.added) {
        this.mount(item);
      }
      this.added = [];
      for (const item of this.dirty) {
        const view = this.views.get(item.key);
        if (view && view.rendered !== item.version) {
          view.rendered = item.version;
          view.update();
          if (item.kind === 'subagent') {
            this.placeSubagent(item, view);
          }
        }
      }
      this.dirty.clear();
    }
    this.empty.hidden = this.model.items.length > 0;
    if (stick) {
      this.node.scrollTop = this.node.scrollHeight;
    }
  }

  /** Scroll to the item showing stored message `id`, and flash it; false if not shown. */
  revealMessage(id: number): boolean {
    this.flush();
    const el = this.list.querySelector<HTMLElement>(`[data-message-id="${id}"], [data-result-message-id="${id}"]`);
    if (!el) {
      return false;
    }
    let parent = el.parentElement;
    while (parent && parent !== this.list) {
      if (parent instanceof HTMLDetailsElement) {
        parent.open = true;
      }
      parent = parent.parentElement;
    }
    this.stuck = false;
    el.scrollIntoView({ block: 'center' });
    el.classList.add('jp-Astro-highlight');
    window.setTimeout(() => el.classList.remove('jp-Astro-highlight'), 2500);
    return true;
  }

  scrollToBottom(): void {
    this.flush();
    this.stuck = true;
    this.node.scrollTop = this.node.scrollHeight;
  }

  /** Shown again (the sidebar was collapsed): catch up with the bottom if we were following it. */
  protected onAfterShow(msg: Message): void {
    super.onAfterShow(msg);
    if (this.stuck) {
      this.scrollToBottom();
    }
  }

  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    if (this.frame !== null) {
      cancelAnimationFrame(this.frame);
    }
    this.resizeObserver?.disconnect();
    this.disposeViews();
    this.model.changed.disconnect(this.onChange, this);
    super.dispose();
  }

  private onChange(_: TimelineModel, change: TimelineChange): void {
    if (change.type === 'reset') {
      this.needsReset = true;
    } else if (!this.needsReset) {
      if (change.type === 'added') {
        this.added.push({ item: change.item });
      }
      this.dirty.add(change.item);
    }
    if (this.frame === null) {
      this.frame = requestAnimationFrame(() => {
        this.frame = null;
        this.flush();
      });
    }
  }

  private mount(item: TimelineItem): void {
    if (this.views.has(item.key)) {
      return;
    }
    const view = createView(item, this.ctx);
    this.views.set(item.key, view);
    const host = item.parent ? this.views.get(item.parent.key)?.childrenHost ?? this.list : this.list;
    host.appendChild(view.el);
    view.rendered = item.version;
    view.update();
    if (item.kind === 'subagent') {
      this.placeSubagent(item, view);
    }
  }

  /** Show a subagent inside the card of the tool call that started it (when that card is shown). */
  private placeSubagent(item: ISubagentItem, view: ItemView): void {
    if (!item.parentToolCallId) {
      return;
    }
    const tool = this.model.tool(item.parentToolCallId);
    const host = tool ? this.views.get(tool.key)?.subagentHost : null;
    if (host && view.el.parentElement !== host) {
      host.appendChild(view.el);
    }
  }

  private rebuild(): void {
    this.disposeViews();
    this.list.textContent = '';
    for (const item of this.model.walk()) {
      this.mount(item);
    }
  }

  private disposeViews(): void {
    for (const view of this.views.values()) {
      view.dispose();
    }
    this.views.clear();
  }
}
