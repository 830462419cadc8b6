/**
 * The notebook bridge against a real shared notebook model (@jupyter/ydoc's YNotebook, the one
 * JupyterLab documents use): edits land in the document as one undo step each, answers follow
 * docs/notebook-bridge.md, and only pending requests of runs this tab started are applied.
 */
import { YNotebook } from '@jupyter/ydoc';
import { describe, expect, it } from 'vitest';

import {
  applyEdit,
  diffLines,
  INotebookRequestEvent,
  IOpenNotebook,
  NotebookBridge,
  NotebookRequestGate
} from '../src/notebookBridge';

function makeNotebook(): YNotebook {
  const nb = YNotebook.create({});
  nb.insertCells(0, [
    { id: 'md1', cell_type: 'markdown', source: '# Fit', metadata: {} },
    { id: 'code1', cell_type: 'code', source: 'x = 20\nx + 1', metadata: {}, outputs: [{ output_type: 'execute_result', data: { 'text/plain': '21' }, metadata: {}, execution_count: 1 }], execution_count: 1 }
  ]);
  nb.undoManager?.clear();
  return nb;
}

function ids(nb: YNotebook): string[] {
  return nb.cells.map(c => c.id);
}

class FakeOpen implements IOpenNotebook {
  ran: string[] = [];
  revealed: string[] = [];
  writable = true;
  constructor(readonly path: string, readonly sharedModel: YNotebook) {}
  toJSON() {
    return { nbformat: 4, nbformat_minor: 5, metadata: {}, cells: this.sharedModel.cells.map(c => c.toJSON()) };
  }
  async runCell(cellId: string) {
    this.ran.push(cellId);
    return { id: cellId, cell_type: 'code', source: 'x', metadata: {}, outputs: [{ output_type: 'stream', name: 'stdout', text: 'hi\n' }], execution_count: 3 };
  }
  reveal(cellId: string) {
    this.revealed.push(cellId);
  }
}

function request(action: 'read' | 'edit' | 'run', args: Record<string, unknown>, path = 'analysis/fit.ipynb', id = 'nbreq_1', call = 'call_1'): INotebookRequestEvent {
  return { type: 'notebook_request', request_id: id, tool_call_id: call, action, path, arguments: args, timeout_secs: 60 };
}

describe('applyEdit on the shared model', () => {
  it('inserts after a cell, at an index (negative from the end, clamped) or at the end', () => {
    const nb = makeNotebook();
    const a = applyEdit(nb, { action: 'insert', cell_id: 'md1', source: 'print(1)' });
    expect(a).toMatchObject({ index: 1, cell_type: 'code' });
    expect(ids(nb)[1]).toBe(a.cell_id);
    expect(nb.cells[1].getSource()).toBe('print(1)');
    const b = applyEdit(nb, { action: 'insert', index: -1, source: 'last', cell_type: 'markdown' });
    expect(b.index).toBe(3);
    expect(nb.cells[3].cell_type).toBe('markdown');
    const c = applyEdit(nb, { action: 'insert', index: 99, source: 'clamped' });
    expect(c.index).toBe(4);
    const d = applyEdit(nb, { action: 'insert', index: -99, source: 'first' });
    expect(d.index).toBe(0);
    const e = applyEdit(nb, { action: 'insert', source: 'end' });
    expect(e.index).toBe(nb.cells.length - 1);
    expect(new Set(ids(nb)).size).toBe(nb.cells.length);
    for (const id of ids(nb)) {
      expect(id).toMatch(/^[A-Za-z0-9_-]{1,64}$/);
    }
  });

  it('one agent edit is one undo step, apart from the user typing just before it', () => {
    const nb = makeNotebook();
    nb.cells[0].setSource('# Fit of the light curve'); // the user's own edit
    applyEdit(nb, { action: 'insert', cell_id: 'code1', source: 'y = x * 2' });
    expect(nb.cells).toHaveLength(3);
    nb.undo();
    expect(ids(nb)).toEqual(['md1', 'code1']);
    expect(nb.cells[0].getSource()).toBe('# Fit of the light curve');
  });

  it('replace sets the source, clears stale outputs and returns the old source; undo restores it', () => {
    const nb = makeNotebook();
    const r = applyEdit(nb, { action: 'replace', cell_id: 'code1', source: 'x = 21' });
    expect(r).toEqual({ cell_id: 'code1', index: 1, cell_type: 'code', old_source: 'x = 20\nx + 1' });
    const cell = nb.cells[1].toJSON() as any;
    expect(cell.source).toBe('x = 21');
    expect(cell.outputs).toEqual([]);
    expect(cell.execution_count).toBeNull();
    nb.undo();
    expect(nb.cells[1].getSource()).toBe('x = 20\nx + 1');
  });

  it('replace with another cell_type keeps the id', () => {
    const nb = makeNotebook();
    applyEdit(nb, { action: 'replace', cell_id: 'md1', source: 'print(2)', cell_type: 'code' });
    expect(ids(nb)).toEqual(['md1', 'code1']);
    expect(nb.cells[0].cell_type).toBe('code');
    expect(nb.cells[0].getSource()).toBe('print(2)');
  });

  it('delete removes the cell and says where it was', () => {
    const nb = makeNotebook();
    const r = applyEdit(nb, { action: 'delete', cell_id: 'md1' });
    expect(r).toEqual({ cell_id: 'md1', index: 0, cell_type: 'markdown', old_source: '# Fit' });
    expect(ids(nb)).toEqual(['code1']);
  });

  it('bad input is an error and changes nothing', () => {
    const nb = makeNotebook();
    expect(() => applyEdit(nb, { action: 'replace', cell_id: 'nope', source: 'x' })).toThrow(/no cell with id "nope"/);
    expect(() => applyEdit(nb, { action: 'insert', cell_id: 'nope', source: 'x' })).toThrow(/no cell/);
    expect(() => applyEdit(nb, { action: 'insert', source: 'x', cell_type: 'raw' })).toThrow(/cell_type/);
    expect(() => applyEdit(nb, { action: 'insert' })).toThrow(/source/);
    expect(() => applyEdit(nb, { action: 'delete', cell_id: '"; drop' })).toThrow(/cell_id/);
    expect(() => applyEdit(nb, { action: 'move', cell_id: 'md1' })).toThrow(/unknown edit action/);
    expect(ids(nb)).toEqual(['md1', 'code1']);
    expect(nb.cells[1].getSource()).toBe('x = 20\nx + 1');
  });
});

describe('NotebookBridge answers', () => {
  const open = () => {
    const doc = new FakeOpen('analysis/fit.ipynb', makeNotebook());
    return { doc, bridge: new NotebookBridge({ find: p => (p === doc.path ? doc : null) }) };
  };

  it('answers not_open for a notebook that is not open', async () => {
    const { bridge } = open();
    expect(await bridge.handle(request('edit', { action: 'insert', source: 'x' }, 'other.ipynb'))).toEqual({ status: 'not_open' });
  });

  it('finds the notebook by a server path with a leading slash', async () => {
    const { bridge } = open();
    const a = await bridge.handle(request('read', {}, '/analysis/fit.ipynb'));
    expect(a.status).toBe('ok');
    expect((a as any).notebook.cells.map((c: any) => c.id)).toEqual(['md1', 'code1']);
  });

  it('edit answers the new cell and reveals it', async () => {
    const { doc, bridge } = open();
    const a = (await bridge.handle(request('edit', { action: 'insert', cell_id: 'code1', source: 'y = 2' }))) as any;
    expect(a.status).toBe('ok');
    expect(a.index).toBe(2);
    expect(a.cell_type).toBe('code');
    expect(doc.revealed).toEqual([a.cell_id]);
  });

  it('a read-only document and a missing cell are errors with a message', async () => {
    const { doc, bridge } = open();
    doc.writable = false;
    expect(await bridge.handle(request('edit', { action: 'insert', source: 'y' }))).toEqual({ status: 'error', message: 'the notebook is open read-only' });
    doc.writable = true;
    const a = (await bridge.handle(request('edit', { action: 'delete', cell_id: 'gone' }))) as any;
    expect(a.status).toBe('error');
    expect(a.message).toMatch(/no cell with id "gone"/);
    expect(ids(doc.sharedModel)).toEqual(['md1', 'code1']);
  });

  it('run executes a code cell and answers the cell, its index and the cell count', async () => {
    const { doc, bridge } = open();
    const a = (await bridge.handle(request('run', { cell_id: 'code1' }))) as any;
    expect(doc.ran).toEqual(['code1']);
    expect(a).toMatchObject({ status: 'ok', index: 1, cells: 2 });
    expect(a.cell).toMatchObject({ cell_type: 'code', execution_count: 3, outputs: [{ output_type: 'stream', text: 'hi\n' }] });
    const md = (await bridge.handle(request('run', { cell_id: 'md1' }))) as any;
    expect(md.status).toBe('error');
    expect(md.message).toMatch(/markdown/);
  });

  it('run with expected_source runs only the code the user allowed; a changed cell answers changed', async () => {
    const { doc, bridge } = open();
    const same = (await bridge.handle(request('run', { cell_id: 'code1', expected_source: 'x = 20\nx + 1' }))) as any;
    expect(same.status).toBe('ok');
    expect(doc.ran).toEqual(['code1']);
    doc.sharedModel.getCell(1).setSource('import os\nos.remove("data.fits")');
    const changed = (await bridge.handle(request('run', { cell_id: 'code1', expected_source: 'x = 20\nx + 1' }))) as any;
    expect(changed).toEqual({ status: 'changed', source: 'import os\nos.remove("data.fits")' });
    expect(doc.ran).toEqual(['code1']); // not run again
  });

  it('a replace with expected_source changes only the text the user saw the diff against', async () => {
    const { doc, bridge } = open();
    doc.sharedModel.getCell(1).setSource('x = 20  # mine, typed after the question');
    const stale = (await bridge.handle(request('edit', { action: 'replace', cell_id: 'code1', source: 'x = 21', expected_source: 'x = 20\nx + 1' }))) as any;
    expect(stale).toEqual({ status: 'changed', source: 'x = 20  # mine, typed after the question' });
    expect(doc.sharedModel.getCell(1).getSource()).toBe('x = 20  # mine, typed after the question');
    const ok = (await bridge.handle(request('edit', { action: 'replace', cell_id: 'code1', source: 'x = 21', expected_source: 'x = 20  # mine, typed after the question' }))) as any;
    expect(ok.status).toBe('ok');
    expect(doc.sharedModel.getCell(1).getSource()).toBe('x = 21');
  });
});

describe('NotebookRequestGate', () => {
  const tick = (ms: number) => new Promise(r => setTimeout(r, ms));

  function gate(storage: Map<string, string> = new Map()) {
    const acted: string[] = [];
    const g = new NotebookRequestGate({
      act: async (_run, e) => void acted.push(e.request_id),
      settleMs: 10,
      storage: { getItem: k => storage.get(k) ?? null, setItem: (k, v) => void storage.set(k, v) }
    });
    return { g, acted, storage };
  }

  it('acts once on a pending request of a run this tab started', async () => {
    const { g, acted } = gate();
    g.claim('run_1');
    const e = request('edit', { action: 'insert', source: 'x' });
    g.observe('run_1', e as any);
    g.observe('run_1', e as any); // the same event again (reconnect)
    await tick(40);
    expect(acted).toEqual(['nbreq_1']);
  });

  it('does not re-apply a replayed request whose result follows it', async () => {
    const { g, acted } = gate();
    g.claim('run_1');
    g.observe('run_1', request('edit', { action: 'insert', source: 'x' }) as any);
    g.observe('run_1', { type: 'tool_result', tool_call_id: 'call_1', name: 'notebook_edit', output: 'ok' });
    g.observe('run_1', request('edit', { action: 'insert', source: 'y' }, 'a.ipynb', 'nbreq_2', 'call_2') as any);
    g.observe('run_1', { type: 'done', reason: 'finished' });
    await tick(40);
    expect(acted).toEqual([]);
  });

  it('ignores runs started elsewhere, but remembers its own across a reload of the tab', async () => {
    const storage = new Map<string, string>();
    const first = gate(storage);
    first.g.claim('run_1');
    first.g.observe('run_2', request('edit', { action: 'insert', source: 'x' }) as any);
    await tick(40);
    expect(first.acted).toEqual([]);
    const reloaded = gate(storage);
    reloaded.g.observe('run_1', request('edit', { action: 'insert', source: 'x' }, 'a.ipynb', 'nbreq_9', 'call_9') as any);
    await tick(40);
    expect(reloaded.acted).toEqual(['nbreq_9']);
  });
});

describe('diffLines', () => {
  it('marks removed and added lines around the common ones', () => {
    expect(diffLines('a\nb\nc', 'a\nB\nc')).toEqual([
      { op: ' ', text: 'a' },
      { op: '-', text: 'b' },
      { op: '+', text: 'B' },
      { op: ' ', text: 'c' }
    ]);
    expect(diffLines('', 'x')).toEqual([{ op: '+', text: 'x' }]);
  });
});
