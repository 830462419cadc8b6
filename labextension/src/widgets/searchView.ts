/**
 * The Sessions view: one search box over a list of sessions (title, date, model, turns;
 * rename / delete from a context menu; arrow keys, Enter, F2, Delete) and the history search
 * (`GET astro/api/search/history`), whose hits are grouped per session — the title once,
 * the hits under it, matched words in <mark> built from the «» markers (never server HTML).
 */
import { CommandRegistry } from '@lumino/commands';
import { Menu, Widget } from '@lumino/widgets';

import { AstroAPIError } from '../handler';
import { ISearchHit, ISession } from '../tokens';
import { ellipsesIcon } from '@jupyterlab/ui-components';

import { formatTime, h, renderSnippet, visibleText } from './dom';
import { iconEl } from './icons';

export const SEARCH_DEBOUNCE_MS = 250;

const ROLE_LABEL: Record<string, string> = { user: 'You', assistant: 'Astro', tool: 'Tool result', session: 'Title' };

export interface ISessionsViewOptions {
  search(q: string, sessionId?: string): Promise<ISearchHit[]>;
  sessions(): readonly ISession[];
  currentSessionId(): string | null;
  openSession(id: string): void;
  open(hit: ISearchHit): void;
  rename(id: string): void;
  remove(id: string): void;
  exportSession(id: string): void;
}

export class SessionsView extends Widget {
  readonly input: HTMLInputElement;
  readonly onlySession: HTMLButtonElement;
  private list: HTMLElement;
  private results: HTMLElement;
  private status: HTMLElement;
  private timer: number | null = null;
  private generation = 0;
  private commands = new CommandRegistry();
  private menu: Menu;
  private menuTarget: string | null = null;

  constructor(private options: ISessionsViewOptions) {
    super();
    this.addClass('jp-Astro-sessions');
    this.input = h('input', {
      type: 'search',
      class: 'jp-Astro-input jp-Astro-search-input',
      placeholder: 'Search sessions and messages…',
      'aria-label': 'Search sessions and messages'
    });
    this.onlySession = h('button', {
      type: 'button',
      class: 'jp-Astro-chip jp-Astro-search-only',
      'aria-pressed': 'false',
      title: 'Search only the open session',
      text: 'This chat'
    });
    this.status = h('div', { class: 'jp-Astro-search-status', role: 'status' });
    this.list = h('ul', { class: 'jp-Astro-session-list', 'aria-label': 'Sessions' });
    this.results = h('div', { class: 'jp-Astro-search-results' });
    this.node.append(
      h('div', { class: 'jp-Astro-search-row' }, this.input, this.onlySession),
      this.status,
      this.results,
      this.list
    );
    this.input.addEventListener('input', () => {
      this.renderList();
      this.schedule();
    });
    this.input.addEventListener('keydown', ev => {
      if (ev.key === 'Escape' && this.input.value) {
        ev.stopPropagation();
        this.clear();
      } else if (ev.key === 'Enter') {
        ev.preventDefault();
        this.schedule(0);
      } else if (ev.key === 'ArrowDown') {
        const first = this.focusables()[0];
        if (first) {
          ev.preventDefault();
          ev.stopPropagation(); // the list's own key handler would move on to the second item
          first.focus();
        }
      }
    });
    this.onlySession.addEventListener('click', () => {
      const on = this.onlySession.getAttribute('aria-pressed') !== 'true';
      this.onlySession.setAttribute('aria-pressed', String(on));
      this.schedule(0);
    });
    this.node.addEventListener('keydown', ev => this.onKey(ev));

    this.commands.addCommand('rename', { label: 'Rename…', execute: () => this.menuTarget && this.options.rename(this.menuTarget) });
    this.commands.addCommand('export', { label: 'Export to notebook', execute: () => this.menuTarget && this.options.exportSession(this.menuTarget) });
    this.commands.addCommand('delete', { label: 'Delete…', execute: () => this.menuTarget && this.options.remove(this.menuTarget) });
    this.menu = new Menu({ commands: this.commands });
    this.menu.addClass('jp-Astro-menu');
    this.menu.addItem({ command: 'rename' });
    this.menu.addItem({ command: 'export' });
    this.menu.addItem({ type: 'separator' });
    this.menu.addItem({ command: 'delete' });
  }

  /** Show it: the list up to date, the search box focused. */
  activate(): void {
    this.renderList();
    if (this.input.value.trim()) {
      this.schedule(0);
    }
    this.input.focus();
    // the toolbar button that opened the view takes the focus back after its click
    requestAnimationFrame(() => this.isVisible && this.input.focus());
  }

  clear(): void {
    this.input.value = '';
    this.generation++;
    this.results.textContent = '';
    this.status.textContent = '';
    this.renderList();
  }

  /** Render the sessions whose title matches the search box. */
  renderList(): void {
    const q = this.input.value.trim().toLowerCase();
    const current = this.options.currentSessionId();
    const sessions = this.options.sessions().filter(s => !q || (s.title || 'Untitled session').toLowerCase().includes(q));
    this.list.textContent = '';
    if (!sessions.length) {
      this.list.appendChild(h('li', { class: 'jp-Astro-session-none', role: 'presentation', text: q ? 'No session titles match.' : 'No sessions yet.' }));
    }
    for (const s of sessions) {
      const title = visibleText(s.title || 'Untitled session');
      const turns = typeof s.turns === 'number' ? `${s.turns} turn${s.turns === 1 ? '' : 's'}` : '';
      const when = formatTime(parseWhen(s.updated_at || s.created_at));
      const meta = [when, s.model || s.last_model || '', turns].filter(Boolean).join(' \u00b7 ');
      const more = h(
        'button',
        { type: 'button', class: 'jp-Astro-session-more', title: 'Rename, export or delete', 'aria-label': `Actions for ${title}`, tabindex: -1 },
        iconEl(ellipsesIcon)
      );
      const open = h(
        'button',
        {
          type: 'button',
          class: 'jp-Astro-session-open',
          tabindex: -1,
          'data-session-id': s.id,
          'aria-current': s.id === current ? 'true' : false,
          title
        },
        h('span', { class: 'jp-Astro-session-title', text: title }),
        h('span', { class: 'jp-Astro-session-meta', text: meta })
      );
      const li = h('li', { class: 'jp-Astro-session-item', 'data-session-id': s.id }, open, more);
      open.addEventListener('click', () => this.options.openSession(s.id));
      more.addEventListener('click', ev => {
        ev.stopPropagation();
        const r = more.getBoundingClientRect();
        this.openMenu(s.id, r.left, r.bottom);
      });
      li.addEventListener('contextmenu', ev => {
        ev.preventDefault();
        ev.stopPropagation();
        this.openMenu(s.id, ev.clientX, ev.clientY);
      });
      this.list.appendChild(li);
    }
    const items = this.focusables();
    const selected = items.find(el => el.getAttribute('aria-current') === 'true') ?? items[0];
    if (selected) {
      selected.tabIndex = 0;
    }
  }

  private openMenu(id: string, x: number, y: number): void {
    this.menuTarget = id;
    this.menu.open(x, y);
  }

  private schedule(delay = SEARCH_DEBOUNCE_MS): void {
    if (this.timer !== null) {
      window.clearTimeout(this.timer);
    }
    this.timer = window.setTimeout(() => {
      this.timer = null;
      void this.run();
    }, delay);
  }

  private async run(): Promise<void> {
    const q = this.input.value.trim();
    const generation = ++this.generation;
    if (!q) {
      this.results.textContent = '';
      this.status.textContent = '';
      return;
    }
    const only = this.onlySession.getAttribute('aria-pressed') === 'true';
    const sessionId = only ? this.options.currentSessionId() ?? undefined : undefined;
    if (only && !sessionId) {
      this.results.textContent = '';
      this.status.textContent = 'No session is open.';
      return;
    }
    this.status.textContent = 'Searching…';
    let hits: ISearchHit[];
    try {
      hits = await this.options.search(q, sessionId);
    } catch (error) {
      if (generation === this.generation) {
        this.status.textContent = error instanceof AstroAPIError ? error.message : String(error);
        this.results.textContent = '';
      }
      return;
    }
    if (generation !== this.generation) {
      return; // a newer query is on its way
    }
    this.renderHits(hits);
  }

  /** Hits grouped per session, in the order the server ranked their best hit. */
  private renderHits(hits: ISearchHit[]): void {
    const groups = new Map<string, ISearchHit[]>();
    for (const hit of hits) {
      const list = groups.get(hit.session_id) ?? [];
      list.push(hit);
      groups.set(hit.session_id, list);
    }
    this.status.textContent = hits.length
      ? `${hits.length} message${hits.length === 1 ? '' : 's'} in ${groups.size} session${groups.size === 1 ? '' : 's'}`
      : 'No matches.';
    if (hits.some(hit => hit.role === 'session')) {
      // full-text search found titles (by their words: "galaxies" finds "Galaxy survey") that the
      // letter-by-letter filter above did not: "No session titles match" would contradict them
      this.list.querySelector('.jp-Astro-session-none')?.remove();
    }
    this.results.textContent = '';
    for (const [sessionId, list] of groups) {
      const title = visibleText(list[0].session_title || 'Untitled session');
      const ul = h('ul', { class: 'jp-Astro-search-hits' });
      for (const hit of list) {
        const snippet = h('span', { class: 'jp-Astro-search-snippet' });
        renderSnippet(snippet, hit.snippet ?? '');
        const when = formatTime(parseWhen(hit.created_at));
        const b = h(
          'button',
          { type: 'button', class: 'jp-Astro-search-hit', 'data-session-id': hit.session_id, 'data-message-id': hit.message_id ?? '' },
          h('span', { class: 'jp-Astro-search-role', text: [ROLE_LABEL[hit.role] ?? hit.role, when].filter(Boolean).join(' \u00b7 ') }),
          snippet
        );
        b.addEventListener('click', () => this.options.open(hit));
        ul.appendChild(h('li', {}, b));
      }
      this.results.appendChild(
        h(
          'section',
          { class: 'jp-Astro-search-group', 'data-session-id': sessionId, 'aria-label': title },
          h('div', { class: 'jp-Astro-search-title', title, text: title }),
          ul
        )
      );
    }
  }

  private focusables(): HTMLElement[] {
    return Array.from(this.node.querySelectorAll<HTMLElement>('.jp-Astro-search-hit, .jp-Astro-session-open'));
  }

  private onKey(ev: KeyboardEvent): void {
    const items = this.focusables();
    const active = document.activeElement as HTMLElement | null;
    const i = active ? items.indexOf(active) : -1;
    if (i < 0) {
      return;
    }
    const id = active?.dataset.sessionId ?? '';
    const isSession = !!active?.classList.contains('jp-Astro-session-open');
    const move = (to: HTMLElement) => {
      ev.preventDefault();
      items.forEach(el => (el.tabIndex = -1));
      to.tabIndex = 0;
      to.focus();
    };
    if (ev.key === 'ArrowDown' && i < items.length - 1) {
      move(items[i + 1]);
    } else if (ev.key === 'ArrowUp') {
      if (i > 0) {
        move(items[i - 1]);
      } else {
        ev.preventDefault();
        this.input.focus();
      }
    } else if (ev.key === 'Home') {
      move(items[0]);
    } else if (ev.key === 'End') {
      move(items[items.length - 1]);
    } else if (ev.key === 'Enter' && isSession) {
      ev.preventDefault();
      this.options.openSession(id);
    } else if (ev.key === 'F2' && isSession) {
      ev.preventDefault();
      this.options.rename(id);
    } else if (ev.key === 'Delete' && isSession) {
      ev.preventDefault();
      this.options.remove(id);
    } else if ((ev.key === 'ContextMenu' || (ev.key === 'F10' && ev.shiftKey)) && isSession && active) {
      ev.preventDefault();
      const r = active.getBoundingClientRect();
      this.openMenu(id, r.left + 16, r.bottom);
    }
  }

  dispose(): void {
    if (this.timer !== null) {
      window.clearTimeout(this.timer);
    }
    this.menu.dispose();
    super.dispose();
  }
}

function parseWhen(value: string | undefined): number | undefined {
  if (!value) {
    return undefined;
  }
  let v = value.includes('T') ? value : value.replace(' ', 'T');
  if (!/[zZ]|[+-]\d\d:?\d\d$/.test(v)) {
    v += 'Z';
  }
  const t = Date.parse(v);
  return Number.isFinite(t) ? t : undefined;
}
