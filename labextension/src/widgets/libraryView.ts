/**
 * The library dialog ("…" → Library…): every paper with its state, and Remove for each.
 * Remove asks once, inline on the row (a second click on "Remove for good"), then calls
 * DELETE astro/api/papers/{id}; the row goes and a line says how many passages went with it.
 * Titles come from papers and go in as text only.
 */
import { Dialog, showDialog } from '@jupyterlab/apputils';
import { Widget } from '@lumino/widgets';

import { AstroAPI } from '../handler';
import { IPaper } from '../tokens';
import { button, h, visibleText } from './dom';

const STATE_LABEL: Record<string, string> = {
  parsed: 'searchable',
  downloaded: 'not parsed yet',
  metadata: 'metadata only'
};

/** The dialog body: a list that removes rows as papers are removed. */
export class LibraryList extends Widget {
  constructor(
    private readonly api: AstroAPI,
    papers: IPaper[]
  ) {
    super();
    this.addClass('jp-Astro-library');
    this.status = h('p', { class: 'jp-Astro-library-status', role: 'status', 'aria-live': 'polite' });
    this.list = h('ul', { class: 'jp-Astro-library-list', 'aria-label': 'Papers in the library' });
    this.node.append(this.status, this.list);
    for (const paper of papers) {
      this.list.appendChild(this.row(paper));
    }
    this.summarise();
  }

  private row(paper: IPaper): HTMLLIElement {
    const title = visibleText(paper.title || 'Untitled');
    const state = STATE_LABEL[paper.state] ?? paper.state;
    const remove = button('Remove', () => void this.remove(paper, li, remove), {
      class: 'jp-Astro-button jp-Astro-library-remove',
      'aria-label': `Remove ${title} from the library`
    });
    const li = h(
      'li',
      { class: 'jp-Astro-library-paper', 'data-paper-id': paper.id },
      h('div', { class: 'jp-Astro-library-title', text: title }),
      h(
        'div',
        { class: 'jp-Astro-library-meta' },
        h('code', { text: paper.id }),
        h('span', { class: `jp-Astro-library-state jp-mod-${paper.state}`, text: state })
      ),
      remove
    );
    return li;
  }

  private async remove(paper: IPaper, li: HTMLLIElement, remove: HTMLButtonElement): Promise<void> {
    if (remove.dataset.confirm !== 'yes') {
      remove.dataset.confirm = 'yes';
      remove.textContent = 'Remove for good';
      remove.classList.add('jp-mod-warn');
      this.status.textContent = `Click again to remove ${paper.id}: its passages, PDF copy and Markdown (notes stay).`;
      return;
    }
    remove.disabled = true;
    try {
      const done = await this.api.removePaper(paper.id);
      li.remove();
      this.status.textContent = `Removed ${done.removed} and its ${done.chunks} passage${done.chunks === 1 ? '' : 's'}.`;
    } catch (error) {
      remove.disabled = false;
      this.status.textContent = `Could not remove ${paper.id}: ${(error as Error).message}`;
    }
  }

  private summarise(): void {
    const n = this.list.children.length;
    const waiting = Array.from(this.list.querySelectorAll('.jp-mod-downloaded')).length;
    this.status.textContent =
      n === 0
        ? 'The library is empty. Add papers with the agent, the bookmarklet or `astro-jupyter library add`.'
        : `${n} paper${n === 1 ? '' : 's'}` + (waiting ? `; ${waiting} not parsed yet (not searchable)` : '');
  }

  private readonly status: HTMLElement;
  private readonly list: HTMLUListElement;
}

/** Open the library dialog (lists the papers first; errors go to `onError`). */
export async function openLibrary(api: AstroAPI, onError: (error: unknown) => void): Promise<void> {
  let papers: IPaper[];
  try {
    papers = await api.listPapers();
  } catch (error) {
    onError(error);
    return;
  }
  await showDialog({
    title: 'Library',
    body: new LibraryList(api, papers),
    buttons: [Dialog.okButton({ label: 'Close' })]
  });
}
