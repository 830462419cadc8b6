/**
 * The notebook bridge (docs/notebook-bridge.md): the server asks, with a `notebook_request`
 * event, that the sidebar read, edit or run a notebook the user has open; the sidebar applies
 * it to the OPEN document — through its shared model, so the cell appears live, the document
 * is marked dirty, Ctrl+Z undoes it and collaborators see it — and answers on the answers route.
 *
 * This file holds the protocol logic only (no widgets): edits on an `ISharedNotebook`, the
 * answer shapes, and which requests to act on. `notebookLab.ts` plugs in JupyterLab's tracker
 * and session context; tests drive this file with a real `YNotebook`.
 */
import type { ISharedNotebook } from '@jupyter/ydoc';

/** The `notebook_request` event (server → sidebar). */
export interface INotebookRequestEvent {
  type: 'notebook_request';
  request_id: string;
  tool_call_id: string;
  action: 'read' | 'edit' | 'run';
  path: string;
  arguments: Record<string, unknown>;
  timeout_secs?: number;
  subagent_id?: string | null;
}

/** What the sidebar answers: always a JSON object. */
export type NotebookAnswer =
  | ({ status: 'ok' } & Record<string, unknown>)
  | { status: 'not_open' }
  | { status: 'changed'; source: string }
  | { status: 'error'; message: string };

/** An executed code cell as nbformat JSON (what `run` answers). */
export type CellJSON = Record<string, unknown>;

/** A notebook open in this JupyterLab, as the bridge needs it. */
export interface IOpenNotebook {
  /** Its path relative to the server root (`context.path`). */
  readonly path: string;
  readonly sharedModel: ISharedNotebook;
  /** False when the document cannot be changed (read-only file, no write permission). */
  readonly writable: boolean;
  /** The document as nbformat v4 JSON (`model.toJSON()`). */
  toJSON(): unknown;
  /**
   * Execute a code cell through the notebook's session context; resolves when it finished. With
   * `expectedSource` (the code the user allowed), a cell that holds anything else at the moment it
   * would start is not run: `CellChangedError`.
   */
  runCell(cellId: string, expectedSource?: string): Promise<CellJSON>;
  /** Scroll the notebook to a cell (best effort). */
  reveal(cellId: string): void;
}

/** Where the bridge finds open notebooks. */
export interface INotebookHost {
  find(path: string): IOpenNotebook | null;
}

const CELL_ID = /^[A-Za-z0-9_-]{1,64}$/;

/** An error for the model: answered as `{"status": "error", "message": …}`. */
export class BridgeError extends Error {}

/** The cell is not the code the user was asked about: answered as `{"status": "changed", "source": …}`. */
export class CellChangedError extends Error {
  constructor(readonly source: string) {
    super('the cell changed after the question');
  }
}

/** Normalise a path the way the server sends it (relative to the root, `/`-separated). */
export function normalizePath(path: string): string {
  return path.replace(/\\/g, '/').replace(/^\/+/, '').replace(/\/{2,}/g, '/');
}

function sourceText(source: unknown): string {
  return Array.isArray(source) ? source.join('') : typeof source === 'string' ? source : '';
}

function cellIndex(nb: ISharedNotebook, cellId: string): number {
  const index = nb.cells.findIndex(c => c.id === cellId);
  if (index < 0) {
    throw new BridgeError(`there is no cell with id ${JSON.stringify(cellId)} in the open notebook (see notebook_read)`);
  }
  return index;
}

/**
 * Where a new cell goes: after `cell_id` if given, else at `index` (negative counts from the
 * end, -1 = last; clamped), else at the end — the same rule as the server's `insert_cell`.
 */
export function insertPosition(nb: ISharedNotebook, args: { cell_id?: unknown; index?: unknown }): number {
  const n = nb.cells.length;
  if (typeof args.cell_id === 'string' && args.cell_id) {
    return cellIndex(nb, args.cell_id) + 1;
  }
  if (typeof args.index === 'number' && Number.isInteger(args.index)) {
    const position = args.index >= 0 ? args.index : n + 1 + args.index;
    return Math.min(Math.max(position, 0), n);
  }
  return n;
}

function cellType(value: unknown): 'code' | 'markdown' {
  if (value === undefined || value === null || value === 'code') {
    return 'code';
  }
  if (value === 'markdown') {
    return 'markdown';
  }
  throw new BridgeError(`cell_type must be "code" or "markdown", not ${JSON.stringify(value)}`);
}

/** A fresh cell id unused in this notebook (nbformat 4.5 style). */
function newCellId(nb: ISharedNotebook): string {
  const taken = new Set(nb.cells.map(c => c.id));
  for (;;) {
    const id = Array.from(crypto.getRandomValues(new Uint8Array(4)), b => b.toString(16).padStart(2, '0')).join('');
    if (!taken.has(id)) {
      return id;
    }
  }
}

/**
 * Apply one `edit` to the shared model, as ONE undo step: capturing is stopped before and
 * after, so Ctrl+Z removes exactly this edit (not a user keystroke typed just before it).
 */
export function applyEdit(nb: ISharedNotebook, args: Record<string, unknown>): Record<string, unknown> {
  const action = args.action;
  const undo = (nb as { undoManager?: { stopCapturing(): void } | null }).undoManager;
  undo?.stopCapturing();
  try {
    if (action === 'insert') {
      if (typeof args.source !== 'string') {
        throw new BridgeError('insert needs the cell\'s source');
      }
      const type = cellType(args.cell_type);
      const index = insertPosition(nb, args);
      const id = newCellId(nb);
      const source = args.source;
      nb.transact(() => {
        nb.insertCell(index, type === 'code' ? { id, cell_type: 'code', source, metadata: {}, outputs: [], execution_count: null } : { id, cell_type: 'markdown', source, metadata: {} });
      });
      return { cell_id: id, index, cell_type: type };
    }
    if (action === 'replace' || action === 'delete') {
      if (typeof args.cell_id !== 'string' || !CELL_ID.test(args.cell_id)) {
        throw new BridgeError(`${action} needs the cell_id of the cell (see notebook_read)`);
      }
      const index = cellIndex(nb, args.cell_id);
      const cell = nb.cells[index];
      const oldSource = cell.getSource();
      if (action === 'delete') {
        nb.transact(() => nb.deleteCell(index));
        return { cell_id: args.cell_id, index, cell_type: cell.cell_type, old_source: oldSource };
      }
      // a replace the user approved as a diff against this text: anything else in the cell now stays
      if (typeof args.expected_source === 'string' && oldSource !== args.expected_source) {
        throw new CellChangedError(oldSource);
      }
      if (typeof args.source !== 'string') {
        throw new BridgeError('replace needs the cell\'s source');
      }
      const source = args.source;
      const type = args.cell_type === undefined || args.cell_type === null ? cell.cell_type : cellType(args.cell_type);
      if (type !== cell.cell_type) {
        const metadata = cell.getMetadata();
        const id = cell.id;
        nb.transact(() => {
          nb.deleteCell(index);
          nb.insertCell(index, type === 'code' ? { id, cell_type: 'code', source, metadata, outputs: [], execution_count: null } : { id, cell_type: type as 'markdown', source, metadata });
        });
      } else {
        nb.transact(() => {
          cell.setSource(source);
          if (cell.cell_type === 'code' && oldSource !== source) {
            const code = cell as unknown as { setOutputs(o: unknown[]): void; execution_count: number | null };
            code.setOutputs([]);
            code.execution_count = null;
          }
        });
      }
      return { cell_id: args.cell_id, index, cell_type: type, old_source: oldSource };
    }
    throw new BridgeError(`unknown edit action ${JSON.stringify(action)} (insert, replace or delete)`);
  } finally {
    undo?.stopCapturing();
  }
}

/** Turns requests into answers against the open notebooks. */
export class NotebookBridge {
  constructor(private readonly host: INotebookHost) {}

  async handle(request: INotebookRequestEvent): Promise<NotebookAnswer> {
    const notebook = this.host.find(normalizePath(String(request.path ?? '')));
    if (!notebook) {
      return { status: 'not_open' };
    }
    const args = request.arguments && typeof request.arguments === 'object' ? request.arguments : {};
    try {
      switch (request.action) {
        case 'read':
          return { status: 'ok', notebook: notebook.toJSON() };
        case 'edit': {
          if (!notebook.writable) {
            throw new BridgeError('the notebook is open read-only');
          }
          const result = applyEdit(notebook.sharedModel, args);
          if (args.action !== 'delete') {
            notebook.reveal(String(result.cell_id));
          }
          return { status: 'ok', ...result };
        }
        case 'run': {
          const cellId = args.cell_id;
          if (typeof cellId !== 'string' || !CELL_ID.test(cellId)) {
            throw new BridgeError('run needs the cell_id of a code cell');
          }
          const index = cellIndex(notebook.sharedModel, cellId);
          if (notebook.sharedModel.cells[index].cell_type !== 'code') {
            throw new BridgeError(`cell ${cellId} is a ${notebook.sharedModel.cells[index].cell_type} cell, not code`);
          }
          // the code the user was shown and allowed; anything else in the cell now does not run
          const expected = typeof args.expected_source === 'string' ? args.expected_source : undefined;
          const now = notebook.sharedModel.cells[index].getSource();
          if (expected !== undefined && now !== expected) {
            return { status: 'changed', source: now };
          }
          notebook.reveal(cellId);
          const cell = await notebook.runCell(cellId, expected);
          const after = notebook.sharedModel.cells.findIndex(c => c.id === cellId);
          return { status: 'ok', cell: { ...cell, cell_type: 'code' }, index: after >= 0 ? after : index, cells: notebook.sharedModel.cells.length };
        }
        default:
          throw new BridgeError(`unknown request action ${JSON.stringify(request.action)}`);
      }
    } catch (error) {
      if (error instanceof CellChangedError) {
        return { status: 'changed', source: error.source };
      }
      const message = error instanceof Error ? error.message : String(error);
      return { status: 'error', message: message || 'failed' };
    }
  }
}

/** The `cell` of a run answer: the nbformat fields the protocol names. */
export function cellForAnswer(json: Record<string, unknown>): CellJSON {
  return {
    id: json.id,
    cell_type: 'code',
    source: sourceText(json.source),
    metadata: (json.metadata as object) ?? {},
    outputs: Array.isArray(json.outputs) ? json.outputs : [],
    execution_count: typeof json.execution_count === 'number' ? json.execution_count : null
  };
}

/** What the sidebar did for one tool call (shown on its tool card, linked to the cell). */
export interface INotebookTouch {
  path: string;
  action: string;
  cellId?: string;
  source?: string;
  oldSource?: string;
}

/**
 * Which requests to act on. A request is acted on only while pending — no `tool_result` for
 * its call and no `done` has followed it — and only in runs this tab started (a second tab
 * following the same run must not apply the edit twice). Requests are handled after a short
 * settle delay, so a replay (reattach after a reload, Last-Event-ID) that carries the
 * request's result right behind it never re-applies an answered request.
 */
export class NotebookRequestGate {
  private pending = new Map<string, { runId: string; event: INotebookRequestEvent }>();
  private byCall = new Map<string, string>();
  private handled = new Set<string>();
  private own: Set<string>;
  readonly touches = new Map<string, INotebookTouch>();

  constructor(
    private readonly options: {
      act(runId: string, event: INotebookRequestEvent): Promise<void>;
      settleMs?: number;
      /** Run ids this tab started (kept across a reload of the tab). */
      storage?: Pick<Storage, 'getItem' | 'setItem'> | null;
      onTouch?(toolCallId: string, touch: INotebookTouch): void;
    }
  ) {
    this.own = new Set(this.load());
  }

  private load(): string[] {
    try {
      const raw = this.options.storage?.getItem('astro-jupyter:own-runs');
      const list = raw ? JSON.parse(raw) : [];
      return Array.isArray(list) ? list.filter(x => typeof x === 'string') : [];
    } catch {
      return [];
    }
  }

  /** This tab started `runId`: its notebook requests are ours to apply. */
  claim(runId: string): void {
    this.own.add(runId);
    try {
      this.options.storage?.setItem('astro-jupyter:own-runs', JSON.stringify([...this.own].slice(-20)));
    } catch {
      // storage full or disabled: the claim holds for this page
    }
  }

  owns(runId: string): boolean {
    return this.own.has(runId);
  }

  /** Feed every event of a run, in order. */
  observe(runId: string, event: { type: string; [key: string]: unknown }): void {
    if (event.type === 'notebook_request') {
      const request = event as unknown as INotebookRequestEvent;
      if (!request.request_id || this.handled.has(request.request_id)) {
        return;
      }
      this.touches.set(request.tool_call_id, { path: normalizePath(String(request.path ?? '')), action: request.action });
      if (!this.owns(runId)) {
        return;
      }
      this.pending.set(request.request_id, { runId, event: request });
      this.byCall.set(request.tool_call_id, request.request_id);
      setTimeout(() => void this.fire(request.request_id), this.options.settleMs ?? 150);
    } else if (event.type === 'tool_result') {
      const id = this.byCall.get(String(event.tool_call_id));
      if (id) {
        this.pending.delete(id);
        this.byCall.delete(String(event.tool_call_id));
      }
    } else if (event.type === 'done') {
      for (const [id, p] of this.pending) {
        if (p.runId === runId) {
          this.pending.delete(id);
          this.byCall.delete(p.event.tool_call_id);
        }
      }
    }
  }

  /** Record what an answered request did (for the tool card). */
  record(toolCallId: string, touch: INotebookTouch): void {
    this.touches.set(toolCallId, touch);
    this.options.onTouch?.(toolCallId, touch);
  }

  private async fire(requestId: string): Promise<void> {
    const p = this.pending.get(requestId);
    if (!p || this.handled.has(requestId)) {
      return;
    }
    this.handled.add(requestId);
    this.pending.delete(requestId);
    await this.options.act(p.runId, p.event);
  }
}

/** A line diff (longest common subsequence; small cells) as a <pre> with -/+ lines. */
export function diffLines(before: string, after: string): Array<{ op: ' ' | '-' | '+'; text: string }> {
  const a = before === '' ? [] : before.split('\n');
  const b = after === '' ? [] : after.split('\n');
  if (a.length * b.length > 250_000) {
    return [...a.map(text => ({ op: '-' as const, text })), ...b.map(text => ({ op: '+' as const, text }))];
  }
  const lcs: number[][] = Array.from({ length: a.length + 1 }, () => new Array<number>(b.length + 1).fill(0));
  for (let i = a.length - 1; i >= 0; i--) {
    for (let j = b.length - 1; j >= 0; j--) {
      lcs[i][j] = a[i] === b[j] ? lcs[i + 1][j + 1] + 1 : Math.max(lcs[i + 1][j], lcs[i][j + 1]);
    }
  }
  const out: Array<{ op: ' ' | '-' | '+'; text: string }> = [];
  let i = 0;
  let j = 0;
  while (i < a.length && j < b.length) {
    if (a[i] === b[j]) {
      out.push({ op: ' ', text: a[i] });
      i++;
      j++;
    } else if (lcs[i + 1][j] >= lcs[i][j + 1]) {
      out.push({ op: '-', text: a[i++] });
    } else {
      out.push({ op: '+', text: b[j++] });
    }
  }
  while (i < a.length) {
    out.push({ op: '-', text: a[i++] });
  }
  while (j < b.length) {
    out.push({ op: '+', text: b[j++] });
  }
  return out;
}
