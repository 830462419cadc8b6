/**
 * History search: a debounced box over `GET astro/api/search/history`, a "this session only"
 * toggle, and hits whose snippets show the matched words in <mark> (built from the «» markers
 * of the plain-text snippet, never from server HTML).
 */
import { Widget } from '@lumino/widgets';

import { AstroAPIError } from '../handler';
import { ISearchHit } from '../tokens';
import { h, renderSnippet } from './dom';

export const SEARCH_DEBOUNCE_MS = 250;

export interface ISearchOptions {
  search(q: string, sessionId?: string): Promise<ISearchHit[]>;
  currentSessionId(): string | null;
  open(hit: ISearchHit): void;
}

export class SearchView extends Widget {
  readonly input: HTMLInputElement;
  readonly onlySession: HTMLInputElement;
  private results: HTMLElement;
  private status: HTMLElement;
  private timer: number | null = null;
  private generation = 0;

  constructor(private options: ISearchOptions) {
    super();
    this.addClass('jp-Astro-search');
    this.input = h('input', {
      type: 'search',
      class: 'jp-Astro-input jp-Astro-search-input',
      placeholder: 'Search history…',
      'aria-label': 'Search history'
    });
    this.onlySession = h('input', { type: 'checkbox', class: 'jp-Astro-search-only' });
    this.status = h('div', { class: 'jp-Astro-search-status', role: 'status' });
    this.results = h('ul', { class: 'jp-Astro-search-results', 'aria-label': 'Search results' });
    this.node.append(
      h(
        'div',
        { class: 'jp-Astro-search-row' },
        this.input,
        h('label', { class: 'jp-Astro-checkbox', title: 'Search only the open session' }, this.onlySession, ' This session only')
      ),
      this.status,
      this.results
    );
    this.input.addEventListener('input', () => this.schedule());
    this.input.addEventListener('keydown', ev => {
      if (ev.key === 'Escape') {
        this.clear();
      } else if (ev.key === 'Enter') {
        ev.preventDefault();
        this.schedule(0);
      } else if (ev.key === 'ArrowDown') {
        const first = this.results.querySelector<HTMLButtonElement>('button');
        if (first) {
          ev.preventDefault();
          first.focus();
        }
      }
    });
    this.onlySession.addEventListener('change', () => this.schedule(0));
    this.results.addEventListener('keydown', ev => this.onResultsKey(ev));
  }

  clear(): void {
    this.input.value = '';
    this.generation++;
    this.results.textContent = '';
    this.status.textContent = '';
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
    const sessionId = this.onlySession.checked ? this.options.currentSessionId() ?? undefined : undefined;
    if (this.onlySession.checked && !sessionId) {
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
    this.status.textContent = hits.length ? `${hits.length} result${hits.length === 1 ? '' : 's'}` : 'No matches.';
    this.results.textContent = '';
    for (const hit of hits) {
      const snippet = h('span', { class: 'jp-Astro-search-snippet' });
      renderSnippet(snippet, hit.snippet ?? '');
      const b = h(
        'button',
        { type: 'button', class: 'jp-Astro-search-hit', 'data-session-id': hit.session_id, 'data-message-id': hit.message_id ?? '' },
        h('span', { class: 'jp-Astro-search-title', text: hit.session_title || 'Untitled session' }),
        h('span', { class: 'jp-Astro-search-role', text: hit.role }),
        snippet
      );
      b.addEventListener('click', () => this.options.open(hit));
      this.results.appendChild(h('li', {}, b));
    }
  }

  private onResultsKey(ev: KeyboardEvent): void {
    const buttons = Array.from(this.results.querySelectorAll<HTMLButtonElement>('button'));
    const i = buttons.indexOf(document.activeElement as HTMLButtonElement);
    if (i < 0) {
      return;
    }
    if (ev.key === 'ArrowDown' && i < buttons.length - 1) {
      ev.preventDefault();
      buttons[i + 1].focus();
    } else if (ev.key === 'ArrowUp') {
      ev.preventDefault();
      (i > 0 ? buttons[i - 1] : this.input).focus();
    } else if (ev.key === 'Escape') {
      this.clear();
      this.input.focus();
    }
  }
}
