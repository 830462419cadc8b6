/**
 * AstroPanel: the sidebar. Session bar, model/coordinator controls, history search, the
 * timeline, and the composer with Send / Stop. It wires the models to the views; the
 * decisions (matching, dedupe, cancel-before-id) live in the models.
 */
import { Dialog, InputDialog, showDialog } from '@jupyterlab/apputils';
import { IRenderMimeRegistry } from '@jupyterlab/rendermime';
import { ServerConnection } from '@jupyterlab/services';
import { Panel, Widget } from '@lumino/widgets';

import { AstroAPI, AstroAPIError } from '../handler';
import { RunModel, RunStatus, SessionsModel, sessionLabel } from '../model';
import { TimelineModel } from '../timeline';
import { ISearchHit, ISession } from '../tokens';
import { button, h } from './dom';
import { SearchView } from './searchView';
import { TimelineView } from './timelineView';

const CURRENT_KEY = 'astro-jupyter:current-session';

export interface IAstroPanelOptions {
  api: AstroAPI;
  rendermime: IRenderMimeRegistry | null;
  /** Open a file (a persisted tool output) in JupyterLab. */
  openPath(path: string): void;
  /** Save notebook JSON under a free name near `name` and open it; resolves to its path. */
  saveNotebook(name: string, content: unknown): Promise<string>;
}

const STATUS_TEXT: Record<RunStatus, string> = {
  idle: '',
  starting: 'Starting…',
  running: 'Running…',
  reconnecting: 'Reconnecting…',
  done: '',
  error: 'Connection lost'
};

function storage(): Storage | null {
  try {
    return window.localStorage;
  } catch {
    return null;
  }
}

export class AstroPanel extends Panel {
  readonly timeline = new TimelineModel();
  readonly run: RunModel;
  readonly sessions: SessionsModel;
  readonly timelineView: TimelineView;
  readonly search: SearchView;
  private api: AstroAPI;
  private sessionSelect!: HTMLSelectElement;
  private modelSelect!: HTMLSelectElement;
  private coordinator!: HTMLInputElement;
  private statusChip!: HTMLElement;
  private message!: HTMLElement;
  private input!: HTMLTextAreaElement;
  private sendButton!: HTMLButtonElement;
  private stopButton!: HTMLButtonElement;
  private renameButton!: HTMLButtonElement;
  private deleteButton!: HTMLButtonElement;
  private exportButton!: HTMLButtonElement;
  private opening = 0;
  /** The session being loaded: a prompt sent meanwhile waits for it (no race with the reload). */
  private pendingOpen: Promise<void> | null = null;

  constructor(private options: IAstroPanelOptions) {
    super();
    this.api = options.api;
    this.id = 'astro-jupyter-panel';
    this.addClass('jp-AstroPanel');
    this.title.caption = 'Astro research agent';
    const settings = this.api.settings;
    this.run = new RunModel({
      api: this.api,
      timeline: this.timeline,
      request: (url, init) => ServerConnection.makeRequest(url, init, settings),
      sseOptions: { initialDelayMs: 500, maxDelayMs: 5000 }
    });
    this.sessions = new SessionsModel(this.api);

    this.addWidget(this.buildHeader());
    this.search = new SearchView({
      search: (q, sessionId) => this.api.searchHistory(q, sessionId),
      currentSessionId: () => this.sessions.currentId,
      open: hit => void this.openHit(hit)
    });
    this.addWidget(this.search);
    this.timelineView = new TimelineView(this.timeline, {
      rendermime: options.rendermime,
      answer: (requestId, answer) => void this.run.answer(requestId, answer),
      openPath: path => options.openPath(path)
    });
    this.addWidget(this.timelineView);
    this.addWidget(this.buildComposer());

    this.run.statusChanged.connect(this.onRunStatus, this);
    this.run.error.connect((_, message) => this.showMessage(message), this);
    this.sessions.changed.connect(this.renderSessions, this);
    this.timeline.changed.connect((_, change) => {
      if (change.type === 'added' && change.item.kind === 'notice' && change.item.variant === 'model_switch') {
        void this.loadModels();
      }
    }, this);
    this.onRunStatus(this.run, this.run.status);
  }

  /** Load sessions and models; reopen the session shown before a reload (and reattach to its run). */
  async initialize(): Promise<void> {
    await Promise.all([this.refreshSessions(), this.loadModels()]);
    const last = storage()?.getItem(CURRENT_KEY);
    if (last && this.sessions.sessions.some(s => s.id === last)) {
      await this.openSession(last);
    }
  }

  // -- sessions ------------------------------------------------------------------------------

  async refreshSessions(): Promise<void> {
    try {
      await this.sessions.refresh();
    } catch (error) {
      this.showError('Could not list sessions', error);
    }
  }

  /** Show a session: its stored history, then the live run if one is going on. */
  openSession(id: string | null, messageId?: number | null): Promise<void> {
    const p = this.doOpenSession(id, messageId);
    this.pendingOpen = p;
    this.node.dataset.loading = 'true';
    void p.finally(() => {
      if (this.pendingOpen === p) {
        this.pendingOpen = null;
        delete this.node.dataset.loading;
      }
    });
    return p;
  }

  private async doOpenSession(id: string | null, messageId?: number | null): Promise<void> {
    const ticket = ++this.opening;
    this.run.detach();
    this.timeline.clear();
    this.sessions.select(id);
    this.rememberSession(id);
    this.updateSessionControls();
    // the list's copy until the session itself arrives (both come from the server)
    this.coordinator.checked = id !== null && !!this.sessions.sessions.find(s => s.id === id)?.coordinator;
    if (!id) {
      this.timelineView.flush();
      return;
    }
    let session: ISession;
    let messages;
    try {
      [session, messages] = await Promise.all([this.api.getSession(id), this.api.messages(id)]);
    } catch (error) {
      this.showError('Could not open the session', error);
      return;
    }
    if (ticket !== this.opening) {
      return;
    }
    const active = session.active_run_id ?? null;
    this.timeline.loadMessages(messages.messages, active);
    this.coordinator.checked = !!session.coordinator;
    if (active) {
      this.run.attach(active, id);
    }
    if (messageId !== undefined && messageId !== null) {
      if (!this.timelineView.revealMessage(messageId)) {
        this.timelineView.scrollToBottom();
      }
    } else {
      this.timelineView.scrollToBottom();
    }
  }

  private async openHit(hit: ISearchHit): Promise<void> {
    if (hit.session_id === this.sessions.currentId && hit.message_id !== null) {
      if (this.timelineView.revealMessage(hit.message_id)) {
        return;
      }
    }
    await this.openSession(hit.session_id, hit.message_id);
  }

  private async newSession(): Promise<void> {
    try {
      this.run.detach();
      this.timeline.clear();
      const session = await this.sessions.create('');
      await this.openSession(session.id);
      this.input.focus();
    } catch (error) {
      this.showError('Could not create a session', error);
    }
  }

  private async renameSession(): Promise<void> {
    const current = this.sessions.current;
    if (!current) {
      return;
    }
    const result = await InputDialog.getText({ title: 'Rename session', text: current.title, label: 'Title' });
    if (!result.button.accept || result.value === null) {
      return;
    }
    try {
      await this.sessions.rename(current.id, result.value);
    } catch (error) {
      this.showError('Could not rename the session', error);
    }
  }

  private async deleteSession(): Promise<void> {
    const current = this.sessions.current;
    if (!current) {
      return;
    }
    const result = await showDialog({
      title: 'Delete session',
      body: `Delete "${current.title || 'Untitled session'}" and its messages?`,
      buttons: [Dialog.cancelButton(), Dialog.warnButton({ label: 'Delete' })]
    });
    if (!result.button.accept) {
      return;
    }
    try {
      await this.sessions.remove(current.id);
      await this.openSession(null);
    } catch (error) {
      this.showError('Could not delete the session', error);
    }
  }

  private async exportSession(): Promise<void> {
    const current = this.sessions.current;
    if (!current) {
      return;
    }
    this.exportButton.disabled = true;
    try {
      const notebook = await this.api.exportSession(current.id);
      const base = (current.title || `astro-session-${current.id}`).replace(/[^A-Za-z0-9._-]+/g, '-').replace(/^-+|-+$/g, '').slice(0, 80);
      const path = await this.options.saveNotebook(`${base || 'astro-session'}.ipynb`, notebook);
      this.showMessage(`Exported to ${path}`, 'info');
    } catch (error) {
      this.showError('Export failed', error);
    } finally {
      this.exportButton.disabled = !this.sessions.current;
    }
  }

  private rememberSession(id: string | null): void {
    const s = storage();
    if (!s) {
      return;
    }
    if (id) {
      s.setItem(CURRENT_KEY, id);
    } else {
      s.removeItem(CURRENT_KEY);
    }
  }

  // -- runs ----------------------------------------------------------------------------------

  async send(): Promise<void> {
    const prompt = this.input.value.trim();
    if (!prompt || this.run.active) {
      return;
    }
    this.input.value = '';
    if (this.pendingOpen) {
      await this.pendingOpen;
    }
    this.clearMessage();
    const sessionId = this.sessions.currentId;
    this.timelineView.scrollToBottom();
    const reply = await this.run.start({
      prompt,
      session_id: sessionId ?? undefined,
      coordinator: this.coordinator.checked
    });
    if (!reply) {
      this.input.value = prompt; // nothing is lost on a refused start
      return;
    }
    if (reply.session_id !== sessionId) {
      this.sessions.adopt(reply.session_id);
      this.rememberSession(reply.session_id); // the run stored its coordinator flag on the new session
      void this.refreshSessions();
    }
  }

  /** The toggle is the session's mode on the server; without a session yet it rides on the first run. */
  private async setCoordinator(on: boolean): Promise<void> {
    const id = this.sessions.currentId;
    if (!id) {
      return;
    }
    this.coordinator.disabled = true;
    try {
      const updated = await this.sessions.setCoordinator(id, on);
      if (this.sessions.currentId === id) {
        this.coordinator.checked = !!updated.coordinator;
      }
    } catch (error) {
      if (this.sessions.currentId === id) {
        this.coordinator.checked = !on;
      }
      this.showError('Could not change coordinator mode', error);
    } finally {
      this.coordinator.disabled = false;
    }
  }

  private onRunStatus(_: RunModel, status: RunStatus): void {
    this.statusChip.textContent = STATUS_TEXT[status];
    this.statusChip.dataset.state = status;
    this.stopButton.disabled = !this.run.active;
    this.sendButton.disabled = this.run.active;
    this.node.dataset.runStatus = status;
    if (status === 'done') {
      void this.refreshSessions();
    }
  }

  // -- models --------------------------------------------------------------------------------

  private async loadModels(): Promise<void> {
    try {
      const reply = await this.api.models();
      this.modelSelect.textContent = '';
      for (const name of reply.models.length ? reply.models : [reply.current]) {
        this.modelSelect.appendChild(h('option', { value: name, text: name }));
      }
      this.modelSelect.value = reply.current;
      this.modelSelect.title = reply.warning ? `Model: ${reply.current} (${reply.warning})` : `Model: ${reply.current}`;
    } catch (error) {
      this.modelSelect.textContent = '';
      this.modelSelect.appendChild(h('option', { value: '', text: 'model unavailable' }));
      this.modelSelect.title = error instanceof Error ? error.message : String(error);
    }
  }

  private async switchModel(): Promise<void> {
    const model = this.modelSelect.value;
    if (!model) {
      return;
    }
    try {
      const reply = await this.api.switchModel(model);
      this.showMessage(`Model: ${reply.current}`, 'info');
    } catch (error) {
      this.showError('Could not switch the model', error);
      void this.loadModels();
    }
  }

  // -- DOM -----------------------------------------------------------------------------------

  private buildHeader(): Widget {
    const header = new Widget();
    header.addClass('jp-Astro-header');
    this.sessionSelect = h('select', { class: 'jp-Astro-select jp-Astro-session-select', 'aria-label': 'Session' });
    this.sessionSelect.addEventListener('change', () => void this.openSession(this.sessionSelect.value || null));
    this.renameButton = button('Rename', () => void this.renameSession(), { title: 'Rename this session' });
    this.deleteButton = button('Delete', () => void this.deleteSession(), { title: 'Delete this session' });
    this.exportButton = button('Export', () => void this.exportSession(), { title: 'Export this session to a notebook and open it' });
    this.modelSelect = h('select', { class: 'jp-Astro-select jp-Astro-model-select', 'aria-label': 'Model' });
    this.modelSelect.addEventListener('change', () => void this.switchModel());
    this.coordinator = h('input', { type: 'checkbox', class: 'jp-Astro-coordinator' });
    this.coordinator.addEventListener('change', () => void this.setCoordinator(this.coordinator.checked));
    this.statusChip = h('span', { class: 'jp-Astro-status', role: 'status', 'aria-live': 'polite' });
    this.message = h('div', { class: 'jp-Astro-message', role: 'alert', hidden: true });
    header.node.append(
      h(
        'div',
        { class: 'jp-Astro-row' },
        this.sessionSelect,
        button('New', () => void this.newSession(), { title: 'Start a new session', class: 'jp-Astro-button jp-Astro-new' }),
        this.renameButton,
        this.deleteButton,
        this.exportButton
      ),
      h(
        'div',
        { class: 'jp-Astro-row' },
        h('label', { class: 'jp-Astro-model-label' }, 'Model ', this.modelSelect),
        h('label', { class: 'jp-Astro-checkbox', title: 'Coordinator mode: delegate to parallel workers' }, this.coordinator, ' Coordinator'),
        h('a', {
          class: 'jp-Astro-link jp-Astro-bookmarklet',
          href: this.api.bookmarkletUrl(),
          target: '_blank',
          rel: 'noopener noreferrer',
          text: 'Bookmarklet'
        }),
        this.statusChip
      ),
      this.message
    );
    return header;
  }

  private buildComposer(): Widget {
    const composer = new Widget();
    composer.addClass('jp-Astro-composer');
    this.input = h('textarea', {
      class: 'jp-Astro-input jp-Astro-prompt',
      rows: 3,
      placeholder: 'Ask the research agent…',
      'aria-label': 'Message to the research agent'
    });
    this.input.addEventListener('keydown', ev => {
      if (ev.key === 'Enter' && !ev.shiftKey && !ev.isComposing) {
        ev.preventDefault();
        void this.send();
      }
    });
    this.sendButton = button('Send', () => void this.send(), { class: 'jp-Astro-button jp-mod-accept jp-Astro-send' });
    this.stopButton = button('Stop', () => void this.run.cancel(), { class: 'jp-Astro-button jp-mod-reject jp-Astro-stop', title: 'Stop the run' });
    composer.node.append(this.input, h('div', { class: 'jp-Astro-composer-actions' }, this.sendButton, this.stopButton));
    return composer;
  }

  private renderSessions(): void {
    const current = this.sessions.currentId;
    this.sessionSelect.textContent = '';
    this.sessionSelect.appendChild(h('option', { value: '', text: current ? '— choose a session —' : 'New session' }));
    for (const s of this.sessions.sessions) {
      this.sessionSelect.appendChild(h('option', { value: s.id, text: sessionLabel(s) }));
    }
    this.sessionSelect.value = current ?? '';
    this.updateSessionControls();
  }

  private updateSessionControls(): void {
    const has = !!this.sessions.currentId;
    this.renameButton.disabled = !has;
    this.deleteButton.disabled = !has;
    this.exportButton.disabled = !has;
    if (this.sessionSelect.value !== (this.sessions.currentId ?? '')) {
      this.sessionSelect.value = this.sessions.currentId ?? '';
    }
  }

  private showError(prefix: string, error: unknown): void {
    const message = error instanceof AstroAPIError ? error.message : error instanceof Error ? error.message : String(error);
    this.showMessage(`${prefix}: ${message}`);
  }

  private showMessage(text: string, kind: 'error' | 'info' = 'error'): void {
    this.message.hidden = false;
    this.message.dataset.kind = kind;
    this.message.textContent = text;
    if (kind === 'info') {
      window.setTimeout(() => {
        if (this.message.textContent === text) {
          this.clearMessage();
        }
      }, 4000);
    }
  }

  private clearMessage(): void {
    this.message.hidden = true;
    this.message.textContent = '';
  }

  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    this.run.dispose();
    super.dispose();
  }
}
