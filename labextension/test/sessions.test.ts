import { describe, expect, it } from 'vitest';

import { IAstroBackend, SessionsModel, sessionLabel } from '../src/model';
import { ISession, ISessionPatch } from '../src/tokens';

/** A server whose list answers can be held back, to replay the stale-answer race. */
class SlowServer {
  sessions: ISession[] = [{ id: 's1', title: 'Old title' }];
  held: Array<() => void> = [];
  async listSessions(): Promise<ISession[]> {
    const snapshot = this.sessions.map(s => ({ ...s }));
    await new Promise<void>(resolve => this.held.push(resolve));
    return snapshot;
  }
  async renameSession(id: string, title: string): Promise<ISession> {
    this.sessions = this.sessions.map(s => (s.id === id ? { ...s, title } : s));
    return this.sessions.find(s => s.id === id)!;
  }
  patches: Array<{ id: string; patch: ISessionPatch }> = [];
  async updateSession(id: string, patch: ISessionPatch): Promise<ISession> {
    this.patches.push({ id, patch });
    this.sessions = this.sessions.map(s => (s.id === id ? { ...s, ...patch } : s));
    return this.sessions.find(s => s.id === id)!;
  }
  async createSession(title = ''): Promise<ISession> {
    const s = { id: `s${this.sessions.length + 1}`, title };
    this.sessions = [s, ...this.sessions];
    return s;
  }
  async deleteSession(id: string): Promise<void> {
    this.sessions = this.sessions.filter(s => s.id !== id);
  }
}

const flush = () => new Promise(r => setTimeout(r, 0));

describe('SessionsModel', () => {
  it('does not let a list fetched before a rename undo the rename', async () => {
    const server = new SlowServer();
    const model = new SessionsModel(server as unknown as IAstroBackend);
    const initial = model.refresh();
    await flush();
    server.held.shift()!();
    await initial;
    const first = model.refresh(); // in flight with "Old title"
    await flush();
    await model.rename('s1', 'New title');
    expect(model.sessions[0].title).toBe('New title');
    server.held.shift()!(); // the stale answer arrives now
    await flush();
    expect(model.sessions[0].title).toBe('New title');
    server.held.shift()!(); // the refetch
    await first;
    expect(model.sessions[0].title).toBe('New title');
  });

  it('setCoordinator PATCHes the server and a list fetched before it does not undo it', async () => {
    const server = new SlowServer();
    const model = new SessionsModel(server as unknown as IAstroBackend);
    const initial = model.refresh();
    await flush();
    server.held.shift()!();
    await initial;
    expect(model.sessions[0].coordinator).toBeUndefined();
    const stale = model.refresh(); // in flight without the flag
    await flush();
    const updated = await model.setCoordinator('s1', true);
    expect(updated.coordinator).toBe(true);
    expect(server.patches).toEqual([{ id: 's1', patch: { coordinator: true } }]);
    expect(model.sessions[0].coordinator).toBe(true);
    server.held.shift()!(); // the stale answer
    await flush();
    expect(model.sessions[0].coordinator).toBe(true);
    server.held.shift()!(); // the refetch reads the stored flag
    await stale;
    expect(model.sessions[0].coordinator).toBe(true);
    expect(model.sessions[0].title).toBe('Old title');
  });

  it('create selects the new session; remove forgets it and clears the selection', async () => {
    const server = new SlowServer();
    const model = new SessionsModel(server as unknown as IAstroBackend);
    const selected: Array<string | null> = [];
    model.currentChanged.connect((_, id) => selected.push(id));
    const s = await model.create('fresh');
    expect(model.currentId).toBe(s.id);
    await model.remove(s.id);
    expect(model.sessions.some(x => x.id === s.id)).toBe(false);
    expect(selected).toEqual([s.id, null]);
  });
});

describe('sessionLabel', () => {
  it('names the model a session runs with', () => {
    expect(sessionLabel({ id: 's1', title: 'Halo mass', model: 'gpt-4o-mini', updated_at: '2026-12-02T20:10:11.123Z' })).toBe(
      'Halo mass · gpt-4o-mini · 2026-12-02 20:10'
    );
    expect(sessionLabel({ id: 's2', title: '', model: '' })).toBe('Untitled session');
  });
});
