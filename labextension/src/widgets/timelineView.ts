/**
 * TimelineView: renders a TimelineModel. Changes are queued and applied once per animation
 * frame, so a burst of hundreds of events costs one layout; a long history is mounted a slice
 * per frame (no main-thread task over a frame's budget) and its Markdown rendered as it nears
 * the viewport. The view sticks to the bottom while the user is there and leaves the scroll
 * position alone when they scrolled up.
 */
import { Message } from '@lumino/messaging';
import { Widget } from '@lumino/widgets';

import { ISubagentItem, TimelineChange, TimelineItem, TimelineModel } from '../timeline';

export interface ITimelineViewOptions {
  /** An example prompt was picked: put it in the composer. */
  fill(text: string): void;
  /** Open the demo's recorded session (offered when no LLM endpoint is configured). */
  openDemo?(): void;
}
import { button, h } from './dom';
import { astroIcon, iconEl } from './icons';
import { createView, IRenderContext, ItemView, messageHeader, SubagentView } from './items';
import { SLICE_MS } from '../tasks';

/**
 * A reopened history shows its newest top-level items at once (a few screens' worth: more only
 * costs style and layout work while the user waits)...
 */
const WINDOW_ITEMS = 60;
/** ...and mounts earlier ones this many at a time as the user scrolls up to them. */
const OLDER_CHUNK = 40;
/**
 * Items mounted per frame while a history mounts in slices: the browser's style and layout of
 * new items come on top of the script's `SLICE_MS` (a forced layout keeps the view at the
 * bottom), and in JupyterLab's page that is several times the script's own time.
 */
const MOUNT_PER_FRAME = 24;
/** Earlier items are mounted when the top of what is shown comes this close. */
const OLDER_MARGIN_PX = 600;

/** Example prompts of the empty state (they fill the composer). */
export const EXAMPLES = [
  'Resolve M31 and give its coordinates and distance',
  'Find recent papers on fast radio burst host galaxies',
  'Summarise the methods of arXiv:2103.00001',
  'Plot the light curve in data/lc.csv in my open notebook'
];

const STICK_PX = 48;
/** A scroll within this long after a wheel/touch/key/pointer event counts as the user's. */
const USER_SCROLL_MS = 1000;

export class TimelineView extends Widget {
  private views = new Map<string, ItemView>();
  private added: Array<{ item: TimelineItem; before: TimelineItem | null }> = [];
  private dirty = new Set<TimelineItem>();
  private frame: number | null = null;
  private needsReset = false;
  private stuck = true;
  private userIntentAt = 0;
  private resizeObserver: ResizeObserver | null = null;
  private list: HTMLElement;
  private empty: HTMLElement;

  private lastTopKind: string | null = null;
  private lazy: IntersectionObserver | null = null;
  /** What to set when no LLM endpoint is configured (in the empty state). */
  private setup!: HTMLElement;
  /** Top-level items of a long history not mounted yet (oldest first), shown on scroll-up. */
  private older: TimelineItem[] = [];
  private olderBar: HTMLButtonElement;
  private olderObserver: IntersectionObserver | null = null;

  constructor(readonly model: TimelineModel, private ctx: IRenderContext, private options: ITimelineViewOptions = { fill: () => undefined }) {
    super();
    this.addClass('jp-Astro-timeline');
    this.node.setAttribute('role', 'log');
    this.node.setAttribute('aria-live', 'polite');
    this.node.setAttribute('aria-label', 'Agent timeline');
    this.node.tabIndex = 0;
    this.empty = this.buildEmpty();
    if (typeof IntersectionObserver !== 'undefined') {
      this.lazy = new IntersectionObserver(
        entries => {
          for (const e of entries) {
            if (e.isIntersecting) {
              const key = (e.target as HTMLElement).dataset.key;
              const view = key ? this.views.get(key) : undefined;
              view?.visible();
            }
          }
        },
        { root: this.node, rootMargin: '800px 0px' }
      );
      this.ctx.lazy = this.lazy;
    }
    this.list = document.createElement('div');
    this.list.className = 'jp-Astro-timeline-list';
    this.olderBar = h('button', { type: 'button', class: 'jp-Astro-older', hidden: true });
    this.olderBar.addEventListener('click', () => this.showOlder());
    this.node.append(this.empty, this.olderBar, this.list);
    if (typeof IntersectionObserver !== 'undefined') {
      this.olderObserver = new IntersectionObserver(
        entries => {
          if (entries.some(e => e.isIntersecting) && this.older.length) {
            this.scheduleOlder();
          }
        },
        { root: this.node, rootMargin: `${OLDER_MARGIN_PX}px 0px 0px 0px` }
      );
      this.olderObserver.observe(this.olderBar);
    }
    model.changed.connect(this.onChange, this);
    // Follow the bottom while the user is there: a scroll by the user decides, and content that
    // grows later (Markdown renders asynchronously) keeps the view pinned.
    // Only a scroll the user asked for (wheel, touch, keys, scrollbar) unpins the view: layout
    // changes (a re-rendered block, the header wrapping) also move scrollTop, and must not.
    for (const type of ['wheel', 'touchstart', 'keydown', 'pointerdown']) {
      this.node.addEventListener(type, () => (this.userIntentAt = Date.now()), { passive: true });
    }
    this.node.addEventListener('scroll', () => {
      if (this.older.length && this.node.scrollTop < OLDER_MARGIN_PX) {
        this.scheduleOlder(); // near the top of what is mounted: the next earlier items
      }
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

  /** True while queued changes wait for a frame (a long history is mounted in slices). */
  get busy(): boolean {
    return this.frame !== null || this.added.length > 0 || this.needsReset;
  }

  /**
   * Apply pending changes: all of them now (`budgetMs` Infinity: tests and scroll-to-message
   * need the DOM up to date), or as many as fit in `budgetMs`, the rest on the next frame.
   */
  flush(budgetMs = Infinity): void {
    if (this.frame !== null) {
      cancelAnimationFrame(this.frame);
      this.frame = null;
    }
    const stick = this.stuck;
    const start = performance.now();
    if (this.needsReset) {
      this.needsReset = false;
      this.added = [];
      this.dirty.clear();
      this.disposeViews();
      this.list.textContent = '';
      this.lastTopKind = null;
      // A long history: the newest items now, the earlier ones as the user scrolls up.
      const top = this.model.items;
      const first = top.length > WINDOW_ITEMS ? top.length - WINDOW_ITEMS : 0;
      this.older = top.slice(0, first);
      this.lastTopKind = first > 0 ? top[first - 1].kind : null;
      for (const item of this.model.walk(top.slice(first))) {
        this.added.push({ item, before: null });
      }
      this.updateOlderBar();
    }
    {
      let i = 0;
      for (; i < this.added.length; i++) {
        if (budgetMs !== Infinity && (i >= MOUNT_PER_FRAME || ((i & 7) === 7 && performance.now() - start > budgetMs))) {
          break;
        }
        this.mount(this.added[i].item, this.added[i].before);
      }
      this.added = i >= this.added.length ? [] : this.added.slice(i);
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
    this.node.toggleAttribute('data-mounting', this.added.length > 0);
    if (stick) {
      this.node.scrollTop = this.node.scrollHeight;
    }
    if (this.added.length > 0) {
      this.frame = requestAnimationFrame(() => {
        this.frame = null;
        this.flush(SLICE_MS);
      });
    }
  }

  /** Mount the next earlier items of a long history above what is shown, keeping the view still. */
  showOlder(count = OLDER_CHUNK): void {
    if (!this.older.length) {
      return;
    }
    const chunk = this.older.splice(Math.max(0, this.older.length - count));
    const anchor = this.list.firstChild;
    const before = this.node.scrollHeight;
    const top = this.node.scrollTop;
    let last: string | null = this.older.length ? this.older[this.older.length - 1].kind : null;
    const frag = document.createDocumentFragment();
    for (const item of this.model.walk(chunk)) {
      if (!item.parent) {
        if (item.kind !== 'user' && last === 'user') {
          frag.appendChild(messageHeader('Astro', item.time ?? Date.now()));
        }
        last = item.kind;
      }
      this.mount(item, null, frag);
    }
    if (anchor && last === 'user' && !(anchor as HTMLElement).classList?.contains('jp-Astro-msg-header')) {
      const firstShown = this.views.get((anchor as HTMLElement).dataset?.key ?? '');
      if (firstShown && firstShown.item.kind !== 'user') {
        frag.appendChild(messageHeader('Astro', firstShown.item.time));
      }
    }
    this.list.insertBefore(frag, anchor);
    this.node.scrollTop = top + (this.node.scrollHeight - before); // what the user reads stays put
    this.updateOlderBar();
  }

  private olderFrame: number | null = null;

  private scheduleOlder(): void {
    if (this.olderFrame !== null) {
      return;
    }
    this.olderFrame = requestAnimationFrame(() => {
      this.olderFrame = null;
      this.showOlder();
      if (this.older.length && this.node.scrollTop < OLDER_MARGIN_PX) {
        this.scheduleOlder(); // still near the top (short items): one more chunk next frame
      }
    });
  }

  private updateOlderBar(): void {
    const n = this.older.length;
    this.olderBar.hidden = n === 0;
    this.olderBar.textContent = n ? `Show earlier messages (${n})` : '';
  }

  /** Scroll to the item showing stored message `id`, and flash it; false if not shown. */
  revealMessage(id: number): boolean {
    this.flush();
    const selector = `[data-message-id="${id}"], [data-result-message-id="${id}"]`;
    let el = this.list.querySelector<HTMLElement>(selector);
    if (!el && this.older.length) {
      this.showOlder(this.older.length); // the hit is further back: mount the rest
      el = this.list.querySelector<HTMLElement>(selector);
    }
    if (!el) {
      return false;
    }
    if (el.dataset.repeatOf) {
      // a repeated call is shown on the line of the first one
      el = this.list.querySelector<HTMLElement>(`.jp-Astro-tool[data-tool-call-id="${CSS.escape(el.dataset.repeatOf)}"]`) ?? el;
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

  /** Follow the bottom (again); a long history still mounting keeps being followed. */
  scrollToBottom(): void {
    this.flush(SLICE_MS);
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
    this.lazy?.disconnect();
    this.olderObserver?.disconnect();
    this.disposeViews();
    this.model.changed.disconnect(this.onChange, this);
    super.dispose();
  }

  private onChange(_: TimelineModel, change: TimelineChange): void {
    if (change.type === 'reset') {
      this.needsReset = true;
    } else if (!this.needsReset) {
      if (change.type === 'added') {
        this.added.push({ item: change.item, before: change.before ?? null });
      }
      this.dirty.add(change.item);
    }
    if (this.frame === null) {
      this.frame = requestAnimationFrame(() => {
        this.frame = null;
        this.flush(SLICE_MS);
      });
    }
  }

  /** Create an item's view and put it in place (`into`: a fragment being built for a prepend). */
  private mount(item: TimelineItem, before: TimelineItem | null = null, into: DocumentFragment | null = null): void {
    if (this.views.has(item.key)) {
      return;
    }
    const view = createView(item, this.ctx);
    this.views.set(item.key, view);
    if (into && !item.parent) {
      into.appendChild(view.el);
      view.rendered = item.version;
      view.update();
      if (item.kind === 'subagent') {
        this.placeSubagent(item, view);
      }
      return;
    }
    const host = item.parent ? this.views.get(item.parent.key)?.childrenHost ?? this.list : this.list;
    const anchor = before ? this.views.get(before.key)?.el ?? null : null;
    if (anchor && anchor.parentElement === host) {
      host.insertBefore(view.el, anchor);
    } else {
      if (host === this.list && !item.parent) {
        // "Astro · 21:04" above the first thing the agent says after a prompt
        if (item.kind !== 'user' && this.lastTopKind === 'user') {
          this.list.appendChild(messageHeader('Astro', item.time ?? Date.now()));
        }
        this.lastTopKind = item.kind;
      }
      host.appendChild(view.el);
    }
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
    const toolView = tool ? this.views.get(tool.key) : undefined;
    const host = toolView?.subagentHost;
    if (tool && toolView && host && view.el.parentElement !== host) {
      host.appendChild(view.el);
      toolView.hosted.push(item);
      if (view instanceof SubagentView) {
        view.hostTool = tool;
        view.update();
      }
    }
  }

  /**
   * With no LLM endpoint configured, the empty state says what to set, and offers the demo's
   * recorded session so the agent can be watched without a key.
   */
  setNoEndpoint(missing: boolean): void {
    this.setup.hidden = !missing;
    this.node.toggleAttribute('data-no-endpoint', missing);
  }

  private buildSetup(): HTMLElement {
    const code = (text: string) => h('code', { text });
    const demo = button('Open the demo session', () => this.options.openDemo?.(), {
      class: 'jp-Astro-button jp-mod-accept jp-Astro-setup-demo',
      title: 'A recorded run of the agent over the demo library: no key needed'
    });
    return h(
      'div',
      { class: 'jp-Astro-setup', role: 'note', 'aria-label': 'Set up a model endpoint', hidden: true },
      h('div', { class: 'jp-Astro-setup-title', text: 'No model endpoint is configured' }),
      h(
        'p',
        {},
        'Set ',
        code('OPENAI_API_KEY'),
        ' for OpenAI, or ',
        code('OPENAI_BASE_URL'),
        ' and ',
        code('LLM_MODEL'),
        ' for another OpenAI-compatible endpoint (Ollama, vLLM, a lab server), then restart Jupyter. ',
        code('astro-jupyter doctor'),
        ' checks the setup.'
      ),
      h('p', {}, demo, ' ', h('span', { class: 'jp-Astro-setup-note', text: 'a recorded run; no key needed' }))
    );
  }

  private buildEmpty(): HTMLElement {
    const examples = EXAMPLES.map(text => {
      const b = h('button', { type: 'button', class: 'jp-Astro-example', text });
      b.addEventListener('click', () => this.options.fill(text));
      return h('li', {}, b);
    });
    return h(
      'div',
      { class: 'jp-Astro-empty' },
      iconEl(astroIcon, 'jp-Astro-empty-icon'),
      h('div', { class: 'jp-Astro-empty-title', text: 'Ask the research agent' }),
      h('div', { class: 'jp-Astro-empty-hint', text: 'Targets, papers, your data and notebooks. Enter sends, Shift+Enter adds a line.' }),
      (this.setup = this.buildSetup()),
      h('ul', { class: 'jp-Astro-examples', 'aria-label': 'Example prompts' }, ...examples)
    );
  }

  private disposeViews(): void {
    for (const view of this.views.values()) {
      view.dispose();
    }
    this.views.clear();
  }
}
