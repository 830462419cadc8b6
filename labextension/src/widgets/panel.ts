/**
 * AstroPanel: the sidebar. A compact toolbar (New chat, Sessions, Export, "…"), the timeline
 * as a chat, the Sessions view (list + history search) in its place on demand, and the
 * composer (Enter sends, one Send⇄Stop button, a model chip). It wires the models to the
 * views; the decisions (matching, dedupe, cancel-before-id) live in the models.
 */
import { Clipboard, Dialog, InputDialog, showDialog } from '@jupyterlab/apputils';
import { ServerConnection } from '@jupyterlab/services';
import { stopIcon } from '@jupyterlab/ui-components';
import { CommandRegistry } from '@lumino/commands';
import { Menu, Panel, Widget } from '@lumino/widgets';

import { AstroAPI, AstroAPIError } from '../handler';
import { RunModel, RunStatus, SessionsModel } from '../model';
import { EndAction, IEndItem, TimelineModel } from '../timeline';
import { ISearchHit, ISession, IStartRunRequest } from '../tokens';
import { visibleText } from './dom';
import { iconEl, sendIcon } from './icons';
import { IRenderContext, warmMarkdown } from './items';
import { ModelChooser } from './modelChooser';
import { buildComposer, buildHeader, IconToolButton, showContext, showSessionUsage } from './panelChrome';
import { DEFAULT_SETTINGS, IAstroPanelOptions, IAstroSettings } from './panelOptions';
import { openLibrary } from './libraryView';
import { SessionsView } from './searchView';
import { TimelineView } from './timelineView';

const CURRENT_KEY = 'astro-jupyter:current-session';

export { DEFAULT_SETTINGS } from './panelOptions';
export type { IAstroPanelOptions, IAstroSettings } from './panelOptions';

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
  readonly sessionsView: SessionsView;
  private api: AstroAPI;
  private settings: IAstroSettings = { ...DEFAULT_SETTINGS };
  private titleEl!: HTMLElement;
  private sessionsButton!: IconToolButton;
  private exportButton!: IconToolButton;
  private statusChip!: HTMLElement;
  private gauge!: HTMLElement;
  private sessionUsage!: HTMLElement;
  private message!: HTMLElement;
  private input!: HTMLTextAreaElement;
  private sendButton!: HTMLButtonElement;
  private composer!: Widget;
  private commands = new CommandRegistry();
  private moreMenu!: Menu;
  private modelChooser!: ModelChooser;
  private coordinatorOn = false;
  private coordinatorBusy = false;
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
    this.buildCommands();

    this.addWidget(this.buildHeader());
    this.sessionsView = new SessionsView({
      search: (q, sessionId) => this.api.searchHistory(q, sessionId),
      sessions: () => this.sessions.sessions,
      currentSessionId: () => this.sessions.currentId,
      openSession: id => {
        this.showSessions(false);
        void this.openSession(id);
      },
      open: hit => {
        this.showSessions(false);
        void this.openHit(hit);
      },
      rename: id => void this.renameSession(id),
      remove: id => void this.deleteSession(id),
      exportSession: id => void this.exportSession(id)
    });
    this.sessionsView.hide();
    this.sessionsView.node.addEventListener('keydown', ev => {
      if (ev.key === 'Escape') {
        this.showSessions(false);
        this.input.focus();
      }
    });
    this.addWidget(this.sessionsView);
    const ctx: IRenderContext = {
      rendermime: options.rendermime,
      answer: (requestId, answer) => void this.run.answer(requestId, answer),
      openPath: path => options.openPath(path),
      code: (action, text) => void this.codeAction(action, text),
      continueRun: (item, action) => void this.continueRun(item, action),
      expandTools: () => this.settings.expandToolLines,
      lazy: null,
      decorateTool: (tool, el) => options.notebook?.decorateTool(tool, el)
    };
    if (options.rendermime) {
      warmMarkdown(options.rendermime);
    }
    this.timelineView = new TimelineView(this.timeline, ctx, {
      fill: text => this.fillPrompt(text),
      openDemo: () => void this.openDemo()
    });
    this.addWidget(this.timelineView);
    this.composer = this.buildComposer();
    this.addWidget(this.composer);
    options.notebook?.mount(this.composer.node);
    options.notebook?.attach(this.run);

    this.timeline.usage.connect((_, usage) => {
      showContext(this.gauge, usage);
      showSessionUsage(this.sessionUsage, this.timeline.sessionUsage());
    }, this);
    this.run.statusChanged.connect(this.onRunStatus, this);
    this.run.error.connect((_, message) => this.showMessage(message), this);
    this.sessions.changed.connect(this.renderSessions, this);
    this.timeline.changed.connect((_, change) => {
      if (change.type === 'added' && change.item.kind === 'notice' && change.item.variant === 'model_switch') {
        void this.modelChooser.load();
      }
    }, this);
    this.onRunStatus(this.run, this.run.status);
    this.renderSessions();
  }

  /** Load sessions and models; reopen the session shown before a reload (and reattach to its run). */
  async initialize(): Promise<void> {
    const ticket = this.opening;
    // The model list can wait for the agent host's start (seconds): the session does not wait for it.
    const models = this.modelChooser.load();
    await this.refreshSessions();
    const last = storage()?.getItem(CURRENT_KEY);
    // A user who opened a session or sent a prompt meanwhile keeps it: reopening would reset the view
    // mid-run, from a store the run has not finished writing (their prompt vanished).
    const untouched = ticket === this.opening && !this.run.active;
    if (untouched && last && this.sessions.sessions.some(s => s.id === last)) {
      await this.openSession(last);
    }
    await models;
  }

  /** Apply the user's settings (on load and whenever they change). */
  configure(settings: Partial<IAstroSettings>): void {
    this.settings = { ...this.settings, ...settings };
    this.node.toggleAttribute('data-hide-thinking', !this.settings.showThinking);
  }

  /** Whether a notebook is open to insert code into (shows Insert / Run under code blocks). */
  setNotebookAvailable(available: boolean): void {
    this.node.toggleAttribute('data-notebook', available);
  }

  // -- sessions ------------------------------------------------------------------------------

  /** Open the demo's recorded session (imported for this user on first ask), replayed like any reopened one. */
  private async openDemo(): Promise<void> {
    try {
      const session = await this.api.demoSession();
      await this.refreshSessions();
      await this.openSession(session.id);
    } catch (error) {
      this.showError('Could not open the demo session', error);
    }
  }

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
    // the list's copy until the session itself arrives (both come from the server)
    this.setCoordinatorShown(id !== null && !!this.sessions.sessions.find(s => s.id === id)?.coordinator);
    this.renderSessions();
    if (!id) {
      this.timelineView.flush();
      return;
    }
    let session: ISession;
    let messages;
    let events;
    try {
      ({ session, messages, events } = await this.api.sessionHistory(id));
    } catch (error) {
      this.showError('Could not open the session', error);
      return;
    }
    if (ticket !== this.opening) {
      return;
    }
    const active = session.active_run_id ?? null;
    const ends = new Map((session.runs ?? []).map(r => [r.id, r.status] as [string, string]));
    const loaded = await this.timeline.loadMessagesAsync(messages, active, ends, {
      stale: () => ticket !== this.opening,
      events
    });
    if (!loaded) {
      return;
    }
    this.setCoordinatorShown(!!session.coordinator);
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
    this.showSessions(false);
    try {
      this.run.detach();
      this.timeline.clear();
      const ticket = this.opening;
      const session = await this.sessions.create('');
      if (ticket !== this.opening) {
        return; // a session was opened while this one was being created: the later choice stays
      }
      await this.openSession(session.id);
      this.input.focus();
    } catch (error) {
      this.showError('Could not create a session', error);
    }
  }

  private async renameSession(id = this.sessions.currentId): Promise<void> {
    const session = this.sessions.sessions.find(s => s.id === id);
    if (!session) {
      return;
    }
    const result = await InputDialog.getText({ title: 'Rename session', text: session.title, label: 'Title' });
    if (!result.button.accept || result.value === null) {
      return;
    }
    try {
      await this.sessions.rename(session.id, result.value);
    } catch (error) {
      this.showError('Could not rename the session', error);
    }
  }

  private async deleteSession(id = this.sessions.currentId): Promise<void> {
    const session = this.sessions.sessions.find(s => s.id === id);
    if (!session) {
      return;
    }
    const result = await showDialog({
      title: 'Delete session',
      body: `Delete "${visibleText(session.title || 'Untitled session')}" and its messages?`,
      buttons: [Dialog.cancelButton(), Dialog.warnButton({ label: 'Delete' })]
    });
    if (!result.button.accept) {
      return;
    }
    try {
      const wasCurrent = session.id === this.sessions.currentId;
      await this.sessions.remove(session.id);
      if (wasCurrent) {
        await this.openSession(null);
      }
    } catch (error) {
      this.showError('Could not delete the session', error);
    }
  }

  private async exportSession(id = this.sessions.currentId): Promise<void> {
    const session = this.sessions.sessions.find(s => s.id === id);
    if (!session) {
      return;
    }
    this.exportButton.enabled = false;
    try {
      const notebook = await this.api.exportSession(session.id);
      const base = (session.title || `astro-session-${session.id}`).replace(/[^A-Za-z0-9._-]+/g, '-').replace(/^-+|-+$/g, '').slice(0, 80);
      const path = await this.options.saveNotebook(`${base || 'astro-session'}.ipynb`, notebook);
      this.showMessage(`Exported to ${path}`, 'info');
    } catch (error) {
      this.showError('Export failed', error);
    } finally {
      this.exportButton.enabled = !!this.sessions.current;
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

  /** Show the Sessions view in place of the chat (or go back). */
  showSessions(on: boolean): void {
    if (on === this.sessionsView.isVisible) {
      return;
    }
    this.sessionsView.setHidden(!on);
    this.timelineView.setHidden(on);
    this.composer.setHidden(on);
    this.sessionsButton.pressed = on;
    this.node.toggleAttribute('data-sessions', on);
    if (on) {
      this.sessionsView.activate();
      void this.refreshSessions();
    }
  }

  // -- runs ----------------------------------------------------------------------------------

  async send(): Promise<void> {
    const prompt = this.input.value.trim();
    if (!prompt || this.run.active) {
      return;
    }
    this.input.value = '';
    const ok = await this.startRun({ prompt });
    if (!ok) {
      this.input.value = prompt; // nothing is lost on a refused start
    }
  }

  private async startRun(request: Omit<IStartRunRequest, 'session_id' | 'coordinator'>): Promise<boolean> {
    if (this.pendingOpen) {
      await this.pendingOpen;
    }
    this.clearMessage();
    const sessionId = this.sessions.currentId;
    this.timelineView.scrollToBottom();
    const reply = await this.run.start({
      ...(this.options.notebook?.runContext() ?? {}),
      ...request,
      session_id: sessionId ?? undefined,
      coordinator: this.coordinatorOn
    });
    if (!reply) {
      return false;
    }
    if (reply.session_id !== sessionId) {
      this.sessions.adopt(reply.session_id);
      this.rememberSession(reply.session_id); // the run stored its coordinator flag on the new session
      void this.refreshSessions();
    }
    return true;
  }

  /** A banner's action: switch model, a new chat, retry the prompt, more steps, or go on. */
  private async continueRun(item: IEndItem, action: EndAction): Promise<void> {
    if (action === 'switch_model') {
      this.openModels(this.modelChooser.chip ?? this.node);
      return;
    }
    if (this.run.active) {
      return;
    }
    if (action === 'new_chat') {
      await this.newSession();
    } else if (action === 'retry') {
      const prompt = [...this.timeline.items].reverse().find(i => i.kind === 'user' && i.runId === item.runId);
      await this.startRun({ prompt: prompt && prompt.kind === 'user' ? prompt.text : 'Please try again.' });
    } else if (action === 'more_steps') {
      await this.startRun({
        prompt: 'Continue where you left off.',
        max_steps: Math.max(1, Math.min(200, this.settings.continueMaxSteps))
      });
    } else {
      await this.startRun({ prompt: 'Continue.' });
    }
  }

  private async setCoordinator(on: boolean): Promise<void> {
    const id = this.sessions.currentId;
    if (!id) {
      this.setCoordinatorShown(on); // rides on the first run, which creates the session
      return;
    }
    this.coordinatorBusy = true;
    try {
      const updated = await this.sessions.setCoordinator(id, on);
      if (this.sessions.currentId === id) {
        this.setCoordinatorShown(!!updated.coordinator);
      }
    } catch (error) {
      this.showError('Could not change coordinator mode', error);
    } finally {
      this.coordinatorBusy = false;
    }
  }

  private setCoordinatorShown(on: boolean): void {
    this.coordinatorOn = on;
    this.node.dataset.coordinator = String(on);
    this.commands.notifyCommandChanged('astro:coordinator');
  }

  private onRunStatus(_: RunModel, status: RunStatus): void {
    this.statusChip.textContent = STATUS_TEXT[status];
    this.statusChip.dataset.state = status;
    const stop = this.run.active;
    this.sendButton.dataset.action = stop ? 'stop' : 'send';
    this.sendButton.classList.toggle('jp-mod-stop', stop);
    this.sendButton.setAttribute('aria-label', stop ? 'Stop the run' : 'Send');
    this.sendButton.title = stop ? 'Stop the run' : 'Send (Enter)';
    this.sendButton.textContent = '';
    this.sendButton.appendChild(iconEl(stop ? stopIcon : sendIcon));
    this.node.dataset.runStatus = status;
    if (status === 'done') {
      void this.refreshSessions();
    }
  }

  private fillPrompt(text: string): void {
    this.input.value = text;
    this.input.focus();
    this.input.setSelectionRange(text.length, text.length);
  }

  private async codeAction(action: 'copy' | 'insert' | 'run', code: string): Promise<void> {
    if (action === 'copy') {
      Clipboard.copyToSystem(code);
      this.showMessage('Copied to the clipboard', 'info');
      return;
    }
    const done = (await this.options.insertCode?.(code, action === 'run')) ?? false;
    if (!done) {
      this.showMessage('Open a notebook to insert the code into.');
    }
  }

  // -- DOM -----------------------------------------------------------------------------------

  private buildCommands(): void {
    const c = this.commands;
    c.addCommand('astro:coordinator', {
      label: 'Coordinator mode',
      caption: 'Delegate to parallel workers (stored on the session)',
      isToggled: () => this.coordinatorOn,
      isEnabled: () => !this.coordinatorBusy,
      execute: () => void this.setCoordinator(!this.coordinatorOn)
    });
    c.addCommand('astro:rename', { label: 'Rename chat…', isEnabled: () => !!this.sessions.currentId, execute: () => void this.renameSession() });
    c.addCommand('astro:delete', { label: 'Delete chat…', isEnabled: () => !!this.sessions.currentId, execute: () => void this.deleteSession() });
    c.addCommand('astro:library', {
      label: 'Library…',
      caption: 'The papers in the library: which are searchable, and remove',
      execute: () => void openLibrary(this.api, error => this.showError('Could not list the library', error))
    });
    c.addCommand('astro:bookmarklet', {
      label: 'Bookmarklet…',
      caption: 'Send papers from your browser to this library',
      execute: () => void window.open(this.api.bookmarkletUrl(), '_blank', 'noopener')
    });
    c.addCommand('astro:settings', {
      label: 'Settings…',
      isEnabled: () => !!this.options.openSettings,
      execute: () => this.options.openSettings?.()
    });
    this.modelChooser = new ModelChooser({
      api: this.api,
      commands: c,
      host: this.node,
      info: text => this.showMessage(text, 'info'),
      error: (prefix, error) => this.showError(prefix, error),
      loaded: noEndpoint => this.timelineView?.setNoEndpoint(noEndpoint)
    });
    this.moreMenu = new Menu({ commands: c });
    this.moreMenu.addClass('jp-Astro-menu');
    this.moreMenu.addItem({ command: 'astro:coordinator' });
    this.moreMenu.addItem({ type: 'submenu', submenu: this.modelChooser.menu });
    this.moreMenu.addItem({ type: 'separator' });
    this.moreMenu.addItem({ command: 'astro:rename' });
    this.moreMenu.addItem({ command: 'astro:delete' });
    this.moreMenu.addItem({ type: 'separator' });
    this.moreMenu.addItem({ command: 'astro:library' });
    this.moreMenu.addItem({ command: 'astro:bookmarklet' });
    this.moreMenu.addItem({ command: 'astro:settings' });
  }

  private buildHeader(): Widget {
    const header = buildHeader({
      newSession: () => void this.newSession(),
      toggleSessions: () => this.showSessions(!this.sessionsView.isVisible),
      exportSession: () => void this.exportSession(),
      openMore: anchor => {
        const r = anchor.getBoundingClientRect();
        this.moreMenu.open(r.right - 200, r.bottom);
      }
    });
    ({ titleEl: this.titleEl, sessionsButton: this.sessionsButton, exportButton: this.exportButton, message: this.message } = header);
    this.sessionUsage = header.usage;
    return header.widget;
  }

  private buildComposer(): Widget {
    const composer = buildComposer({
      send: () => void this.send(),
      sendOrStop: () => void (this.run.active ? this.run.cancel() : this.send()),
      openModels: anchor => this.openModels(anchor)
    });
    ({ input: this.input, sendButton: this.sendButton, statusChip: this.statusChip, gauge: this.gauge } = composer);
    this.modelChooser.chip = composer.modelChip;
    this.modelChooser.render();
    return composer.widget;
  }

  private openModels(anchor: HTMLElement): void {
    this.modelChooser.open(anchor); // above the chip (below when there is no room), never over it
  }

  private renderSessions(): void {
    const current = this.sessions.current;
    const title = current ? visibleText(current.title || 'Untitled session') : 'New chat';
    this.titleEl.textContent = title;
    this.titleEl.title = title;
    this.node.dataset.sessionId = this.sessions.currentId ?? '';
    if (this.exportButton) {
      this.exportButton.enabled = !!this.sessions.currentId;
    }
    this.commands.notifyCommandChanged();
    if (this.sessionsView?.isVisible) {
      this.sessionsView.renderList();
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
    this.moreMenu.dispose();
    this.modelChooser.dispose();
    super.dispose();
  }
}
