/**
 * The notebook side of the sidebar, wired to JupyterLab: the open notebooks the bridge acts
 * on (INotebookTracker, each panel's shared model and session context), the "active notebook"
 * chip above the composer, the cell shown on notebook tool cards, and Insert / Run of code
 * blocks. The protocol logic lives in notebookBridge.ts.
 */
import { CodeCell } from '@jupyterlab/cells';
import { INotebookTracker, NotebookActions, NotebookPanel } from '@jupyterlab/notebook';
import type { ISharedNotebook } from '@jupyter/ydoc';

import type { RunModel } from './model';
import {
  BridgeError,
  CellChangedError,
  CellJSON,
  cellForAnswer,
  INotebookHost,
  INotebookRequestEvent,
  INotebookTouch,
  IOpenNotebook,
  NotebookBridge,
  NotebookRequestGate,
  normalizePath
} from './notebookBridge';
import type { IToolItem } from './timeline';
import type { INotebookContext } from './tokens';
import { renderDiff, renderVisible, visibleText } from './widgets/dom';

/** The notebook tools whose cards show a cell. */
const CELL_TOOLS = new Set(['notebook_edit', 'notebook_run']);

/** A notebook panel's path relative to the server root (no RTC drive prefix). */
export function panelPath(panel: NotebookPanel): string {
  const ctx = panel.context as { localPath?: string; path: string };
  return normalizePath(ctx.localPath ?? ctx.path.replace(/^[A-Za-z0-9_-]+:/, ''));
}

class LabNotebook implements IOpenNotebook {
  constructor(private readonly panel: NotebookPanel) {}

  get path(): string {
    return panelPath(this.panel);
  }
  get sharedModel(): ISharedNotebook {
    const model = this.panel.content.model;
    if (!model) {
      throw new BridgeError('the notebook is still loading');
    }
    return model.sharedModel;
  }
  get writable(): boolean {
    return !this.panel.content.model?.readOnly && this.panel.context.contentsModel?.writable !== false;
  }
  toJSON(): unknown {
    return this.panel.content.model?.toJSON();
  }

  async runCell(cellId: string, expectedSource?: string): Promise<CellJSON> {
    const widget = this.panel.content.widgets.find(w => w.model.id === cellId);
    if (!(widget instanceof CodeCell)) {
      throw new BridgeError(`cell ${cellId} is not a code cell of the open notebook`);
    }
    const session = this.panel.sessionContext;
    await session.ready;
    if (!session.session?.kernel) {
      throw new BridgeError('the open notebook has no kernel (the user can pick one in its kernel menu)');
    }
    const source = widget.model.sharedModel.getSource();
    if (expectedSource !== undefined && source !== expectedSource) {
      throw new CellChangedError(source); // changed while the kernel got ready: not what the user allowed
    }
    const reply = await CodeCell.execute(widget, session, { deletedCells: [], recordTiming: false });
    if (!reply && source.trim()) {
      throw new BridgeError('the cell did not finish: the kernel was interrupted or restarted');
    }
    if (reply && reply.content.status === 'aborted') {
      throw new BridgeError('the kernel aborted the execution');
    }
    return cellForAnswer(widget.model.toJSON() as unknown as Record<string, unknown>);
  }

  reveal(cellId: string): void {
    const notebook = this.panel.content;
    const widget = notebook.widgets.find(w => w.model.id === cellId);
    if (widget) {
      void notebook.scrollToCell(widget).catch(() => undefined);
    }
  }
}

export interface INotebookIntegrationOptions {
  tracker: INotebookTracker;
  /** Post a request's answer (`POST astro/api/runs/{run}/answers`). */
  answer(runId: string, requestId: string, answer: Record<string, unknown>): Promise<unknown>;
  /** Bring a notebook tab to the front. */
  activate(panel: NotebookPanel): void;
  /** Open a notebook that is not open (server-relative path); the widget, if it is a notebook. */
  open?(path: string): unknown;
}

/** The sidebar's notebook features; the panel calls mount / attach / runContext / decorateTool. */
export class NotebookIntegration implements INotebookHost {
  private chipOn = true;
  private chipPath = '';
  private chip: HTMLButtonElement | null = null;
  private readonly bridge = new NotebookBridge(this);
  readonly gate: NotebookRequestGate;

  constructor(private readonly options: INotebookIntegrationOptions) {
    let storage: Storage | null = null;
    try {
      storage = window.sessionStorage;
    } catch {
      storage = null;
    }
    this.gate = new NotebookRequestGate({ act: (runId, event) => this.act(runId, event), storage });
    const tracker = options.tracker;
    tracker.currentChanged.connect(() => this.renderChip(), this);
    tracker.activeCellChanged.connect(() => this.renderChip(), this);
  }

  find(path: string): IOpenNotebook | null {
    const panel = this.options.tracker.find(p => panelPath(p) === path);
    return panel && panel.content.model ? new LabNotebook(panel) : null;
  }

  /** Follow a run model: requests of runs started here are applied to the open notebooks. */
  attach(run: RunModel): void {
    run.started.connect((_, runId) => this.gate.claim(runId), this);
    run.event.connect((_, { runId, event }) => this.gate.observe(runId, event as never), this);
  }

  private async act(runId: string, event: INotebookRequestEvent): Promise<void> {
    const answer = await this.bridge.handle(event);
    if (answer.status === 'ok' && event.action !== 'read') {
      const a = answer as Record<string, unknown>;
      const args = event.arguments ?? {};
      const touch: INotebookTouch = {
        path: normalizePath(event.path),
        action: event.action === 'run' ? 'run' : String(args.action ?? ''),
        cellId: String(a.cell_id ?? args.cell_id ?? ''),
        source: typeof args.source === 'string' ? args.source : undefined,
        oldSource: typeof a.old_source === 'string' ? a.old_source : undefined
      };
      this.gate.record(event.tool_call_id, touch);
    }
    try {
      await this.options.answer(runId, event.request_id, answer as Record<string, unknown>);
    } catch (error) {
      console.warn('astro: could not answer the notebook request', event.request_id, error);
    }
  }

  // -- the "active notebook" chip -------------------------------------------------------------

  /** Put the chip above the composer box. */
  mount(composer: HTMLElement): void {
    const chip = document.createElement('button');
    chip.type = 'button';
    chip.className = 'jp-Astro-chip jp-Astro-notebook-chip';
    chip.addEventListener('click', () => {
      this.chipOn = !this.chipOn;
      this.renderChip();
    });
    const row = document.createElement('div');
    row.className = 'jp-Astro-context-row';
    row.appendChild(chip);
    composer.insertBefore(row, composer.firstChild);
    this.chip = chip;
    this.renderChip();
  }

  private renderChip(): void {
    const panel = this.options.tracker.currentWidget;
    const path = panel ? panelPath(panel) : '';
    if (path !== this.chipPath) {
      this.chipPath = path;
      this.chipOn = true; // a newly active notebook is attached again
    }
    const chip = this.chip;
    if (!chip) {
      return;
    }
    const row = chip.parentElement;
    if (row) {
      row.hidden = !path;
    }
    const name = visibleText(path.split('/').pop() ?? path);
    const cells = this.selectedCellIds();
    const what = cells.length > 1 ? ` · ${cells.length} cells` : cells.length === 1 ? ' · active cell' : '';
    chip.dataset.path = path;
    chip.setAttribute('aria-pressed', String(this.chipOn));
    chip.classList.toggle('jp-mod-off', !this.chipOn);
    chip.textContent = this.chipOn ? `${name}${what} \u00d7` : `+ ${name}`;
    chip.title = this.chipOn
      ? `The agent sees ${path}${what} — click to leave it out`
      : `Click to let the agent see ${path}`;
    chip.setAttribute('aria-label', chip.title);
  }

  private selectedCellIds(): string[] {
    const notebook = this.options.tracker.currentWidget?.content;
    if (!notebook) {
      return [];
    }
    return notebook.widgets.filter(w => notebook.isSelectedOrActive(w)).map(w => w.model.id).filter(id => /^[A-Za-z0-9_-]{1,64}$/.test(id)).slice(0, 200);
  }

  /**
   * The run request's `notebook` field: the active notebook and its selected cells while the
   * chip is on; otherwise `{bridge: true}` alone, so notebooks open here are still edited
   * through the open document (never the file under it).
   */
  runContext(): { notebook: INotebookContext } {
    this.renderChip();
    const panel = this.options.tracker.currentWidget;
    const path = panel ? panelPath(panel) : '';
    if (!this.chipOn || !path.endsWith('.ipynb')) {
      return { notebook: { bridge: true } };
    }
    return { notebook: { path, cell_ids: this.selectedCellIds(), bridge: true } };
  }

  // -- tool cards -----------------------------------------------------------------------------

  /** Show the cell a notebook tool touched on its card; a click scrolls the notebook to it. */
  decorateTool(tool: IToolItem, el: HTMLElement): void {
    if (!CELL_TOOLS.has(tool.name)) {
      return;
    }
    const args = (tool.arguments && typeof tool.arguments === 'object' ? tool.arguments : {}) as Record<string, unknown>;
    const meta = (tool.result && !tool.result.isError ? tool.result.metadata : {}) as Record<string, unknown>;
    const touch = this.gate.touches.get(tool.id);
    const action = tool.name === 'notebook_run' ? 'run' : String(meta.action ?? args.action ?? '');
    const cellId = String(meta.cell_id ?? touch?.cellId ?? args.cell_id ?? '');
    const source = typeof meta.source === 'string' ? meta.source : typeof args.source === 'string' ? args.source : touch?.source;
    const oldSource = typeof meta.old_source === 'string' ? meta.old_source : touch?.oldSource;
    const path = touch?.path || String(meta.path ?? args.path ?? '');
    const key = JSON.stringify([action, cellId, source, oldSource, path, tool.status]);
    let box = el.querySelector<HTMLElement>(':scope > .jp-Astro-nbcell');
    if (box && box.dataset.key === key) {
      return;
    }
    if (!box) {
      box = document.createElement('div');
      box.className = 'jp-Astro-nbcell';
      const line = el.querySelector(':scope > .jp-Astro-tool-line');
      el.insertBefore(box, line ? line.nextSibling : el.firstChild);
    }
    box.dataset.key = key;
    box.dataset.cellId = cellId;
    box.textContent = '';
    const link = document.createElement('button');
    link.type = 'button';
    link.className = 'jp-Astro-nbcell-link';
    const name = path.split('/').pop() || path;
    const verb: Record<string, string> = { insert: 'Inserted', replace: 'Replaced', delete: 'Deleted', run: 'Ran' };
    const done = tool.status === 'done';
    link.textContent = visibleText(`${done ? verb[action] ?? action : action} cell ${cellId || '(new)'} · ${name}`);
    link.title = action === 'delete' ? 'Open the notebook' : 'Show this cell in the notebook';
    link.disabled = !path;
    const gone = document.createElement('div');
    gone.className = 'jp-Astro-nbcell-gone';
    gone.setAttribute('role', 'status');
    gone.hidden = true;
    link.addEventListener('click', () => {
      void this.reveal(path, action === 'delete' ? '' : cellId).then(found => {
        // the link outlives the cell: an undo (Ctrl+Z) or the user may have removed it since
        gone.hidden = found !== 'missing';
        gone.textContent = found === 'missing' ? 'That cell is no longer in the notebook (undone?).' : '';
      });
    });
    box.appendChild(link);
    box.appendChild(gone);
    if (action === 'replace' && oldSource !== undefined && source !== undefined) {
      box.appendChild(renderDiff(oldSource, source, 'jp-Astro-nbcell-diff'));
    } else if (action === 'delete' && oldSource !== undefined) {
      box.appendChild(renderDiff(oldSource, '', 'jp-Astro-nbcell-diff'));
    } else if (source !== undefined && action !== 'run') {
      const pre = document.createElement('pre');
      pre.className = 'jp-Astro-pre jp-Astro-nbcell-source';
      renderVisible(pre, source); // hidden characters (bidi, zero-width) shown as escapes, as in the prompt
      box.appendChild(pre);
    }
  }

  /**
   * Bring the notebook to the front (opening it if it is closed) and select/scroll to the cell:
   * 'shown', 'missing' (the notebook no longer has that cell) or 'closed' (it could not be opened).
   */
  async reveal(path: string, cellId: string): Promise<'shown' | 'missing' | 'closed'> {
    const want = normalizePath(path);
    let panel =
      this.options.tracker.find(p => panelPath(p) === want) ??
      this.options.tracker.find(p => want.endsWith('/' + panelPath(p)) || panelPath(p).endsWith('/' + want));
    if (!panel) {
      const opened = want.endsWith('.ipynb') ? this.options.open?.(want) : null;
      if (!(opened instanceof NotebookPanel)) {
        return 'closed';
      }
      panel = opened;
      await panel.context.ready;
    }
    this.options.activate(panel);
    const notebook = panel.content;
    const index = notebook.widgets.findIndex(w => w.model.id === cellId);
    if (index >= 0) {
      notebook.activeCellIndex = index;
      void notebook.scrollToCell(notebook.widgets[index], 'center').catch(() => undefined);
    }
    return index >= 0 || !cellId ? 'shown' : 'missing';
  }

  // -- code blocks ----------------------------------------------------------------------------

  /** Insert code below the active cell of the active notebook (and run it); false without one. */
  async insertCode(code: string, run: boolean): Promise<boolean> {
    const current = this.options.tracker.currentWidget;
    if (!current) {
      return false;
    }
    const notebook = current.content;
    NotebookActions.insertBelow(notebook);
    const cell = notebook.activeCell;
    if (!cell) {
      return false;
    }
    cell.model.sharedModel.setSource(code);
    this.options.activate(current);
    void notebook.scrollToCell(cell, 'center').catch(() => undefined); // the user sees what runs
    if (run) {
      await NotebookActions.runCells(notebook, [cell], current.sessionContext); // that cell only
    }
    return true;
  }
}
