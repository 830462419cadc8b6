/**
 * The sidebar's fixed chrome, built once: the toolbar header (title, New chat, Sessions,
 * Export, "…", the message line) and the composer (prompt, model chip, status, Send⇄Stop).
 * The panel (panel.ts) passes what the controls do and keeps the returned elements.
 */
import { downloadIcon, ellipsesIcon, historyIcon, LabIcon, Toolbar } from '@jupyterlab/ui-components';
import { Panel, Widget } from '@lumino/widgets';

import { formatUsd } from '../timelineItems';
import { ISessionUsage, IUsageEvent } from '../tokens';
import { h } from './dom';
import { iconEl, newChatIcon } from './icons';

/**
 * A toolbar icon button with a tooltip: a native <button> holding a LabIcon. (JupyterLab's
 * ToolbarButton renders a <jp-button> host that always carries aria-pressed without a role,
 * which axe reports as a critical violation.)
 */
export class IconToolButton extends Widget {
  constructor(options: { icon: LabIcon; label: string; className: string; onClick: () => void; toggle?: boolean }) {
    super({ node: document.createElement('button') });
    const b = this.node as HTMLButtonElement;
    b.type = 'button';
    b.title = options.label;
    b.setAttribute('aria-label', options.label);
    if (options.toggle) {
      b.setAttribute('aria-pressed', 'false');
    }
    this.addClass('jp-Astro-toolbutton');
    this.addClass(options.className);
    b.appendChild(iconEl(options.icon));
    b.addEventListener('click', () => options.onClick());
  }
  set enabled(value: boolean) {
    (this.node as HTMLButtonElement).disabled = !value;
  }
  set pressed(value: boolean) {
    this.node.setAttribute('aria-pressed', String(value));
  }
}

export interface IHeaderActions {
  newSession(): void;
  toggleSessions(): void;
  exportSession(): void;
  openMore(anchor: HTMLElement): void;
}

export interface IHeader {
  widget: Widget;
  toolbar: Toolbar;
  titleEl: HTMLElement;
  sessionsButton: IconToolButton;
  exportButton: IconToolButton;
  moreButton: IconToolButton;
  /** The one-line error / info message under the toolbar. */
  message: HTMLElement;
  /** The session's tokens and cost so far. */
  usage: HTMLElement;
}

export function buildHeader(actions: IHeaderActions): IHeader {
  const header = new Panel();
  header.addClass('jp-Astro-header');
  const toolbar = new Toolbar();
  toolbar.addClass('jp-Astro-toolbar');
  const title = new Widget();
  title.addClass('jp-Astro-title');
  toolbar.addItem('title', title);
  const usage = new Widget();
  usage.addClass('jp-Astro-session-usage');
  usage.node.hidden = true;
  toolbar.addItem('usage', usage);
  toolbar.addItem(
    'new',
    new IconToolButton({ icon: newChatIcon, label: 'New chat', className: 'jp-Astro-new', onClick: () => actions.newSession() })
  );
  const sessionsButton = new IconToolButton({
    icon: historyIcon,
    label: 'Sessions and search',
    className: 'jp-Astro-sessions-button',
    toggle: true,
    onClick: () => actions.toggleSessions()
  });
  toolbar.addItem('sessions', sessionsButton);
  const exportButton = new IconToolButton({
    icon: downloadIcon,
    label: 'Export this chat to a notebook',
    className: 'jp-Astro-export',
    onClick: () => actions.exportSession()
  });
  exportButton.enabled = false;
  toolbar.addItem('export', exportButton);
  const moreButton: IconToolButton = new IconToolButton({
    icon: ellipsesIcon,
    label: 'More: coordinator mode, model, bookmarklet, settings',
    className: 'jp-Astro-more-menu',
    onClick: () => actions.openMore(moreButton.node)
  });
  toolbar.addItem('more', moreButton);
  header.addWidget(toolbar);
  const messageWidget = new Widget();
  const message = messageWidget.node;
  messageWidget.addClass('jp-Astro-message');
  message.setAttribute('role', 'alert');
  message.hidden = true;
  header.addWidget(messageWidget);
  return { widget: header, toolbar, titleEl: title.node, sessionsButton, exportButton, moreButton, message, usage: usage.node };
}

export interface IComposerActions {
  /** Enter in the prompt. */
  send(): void;
  /** The one button: Send, or Stop while a run is active. */
  sendOrStop(): void;
  openModels(anchor: HTMLElement): void;
}

export interface IComposer {
  widget: Widget;
  input: HTMLTextAreaElement;
  sendButton: HTMLButtonElement;
  modelChip: HTMLButtonElement;
  statusChip: HTMLElement;
  /** How full the context is (a meter by the model chip; hidden until a run reports it). */
  gauge: HTMLElement;
}

export function buildComposer(actions: IComposerActions): IComposer {
  const composer = new Widget();
  composer.addClass('jp-Astro-composer');
  const input = h('textarea', {
    class: 'jp-Astro-input jp-Astro-prompt',
    rows: 2,
    placeholder: 'Ask the research agent…',
    'aria-label': 'Message to the research agent'
  });
  input.addEventListener('keydown', ev => {
    if (ev.key === 'Enter' && !ev.shiftKey && !ev.isComposing) {
      ev.preventDefault();
      actions.send();
    }
  });
  const sendButton = h('button', { type: 'button', class: 'jp-Astro-send', 'aria-label': 'Send' });
  sendButton.addEventListener('click', () => actions.sendOrStop());
  const modelChip = h('button', { type: 'button', class: 'jp-Astro-chip jp-Astro-model-chip', text: '…' });
  modelChip.addEventListener('click', () => actions.openModels(modelChip));
  const statusChip = h('span', { class: 'jp-Astro-status', role: 'status', 'aria-live': 'polite' });
  const gauge = h(
    'span',
    { class: 'jp-Astro-context-gauge', role: 'meter', 'aria-label': 'Context window', 'aria-valuemin': '0' },
    h('span', { class: 'jp-Astro-gauge-fill' }),
    h('span', { class: 'jp-Astro-gauge-mark' })
  );
  gauge.hidden = true;
  composer.node.append(
    h('div', { class: 'jp-Astro-composer-box' }, input, h('div', { class: 'jp-Astro-composer-actions' }, modelChip, gauge, statusChip, sendButton))
  );
  return { widget: composer, input, sendButton, modelChip, statusChip, gauge };
}

const n = (value: number): string => value.toLocaleString('en-US');

/** The gauge by the model chip: how full the context was after the last run, and where compaction starts. */
export function showContext(gauge: HTMLElement, usage: IUsageEvent | null): void {
  const window = usage?.context_window ?? 0;
  const used = usage?.context_tokens ?? 0;
  gauge.hidden = !window;
  if (!window) {
    return;
  }
  const share = (x: number): number => Math.min(100, Math.round((100 * x) / window));
  const at = usage?.compact_at ?? 0;
  const fill = gauge.querySelector<HTMLElement>('.jp-Astro-gauge-fill');
  const mark = gauge.querySelector<HTMLElement>('.jp-Astro-gauge-mark');
  fill?.style.setProperty('width', `${share(used)}%`);
  mark?.style.setProperty('left', `${share(at)}%`);
  if (mark) {
    mark.hidden = !at;
  }
  gauge.setAttribute('aria-valuemax', String(window));
  gauge.setAttribute('aria-valuenow', String(Math.min(used, window)));
  const compaction = at ? `; compaction starts at ${n(at)} (${share(at)}%)` : '';
  const text = `Context: ${n(used)} of ${n(window)} tokens (${share(used)}%)${compaction}`;
  gauge.setAttribute('aria-valuetext', text);
  gauge.title = text;
  gauge.dataset.near = String(!!at && used >= at * 0.9);
}

/** The session's total (GET sessions/{id} sums its stored runs) in the header. */
export function showSessionUsage(el: HTMLElement, usage: ISessionUsage | undefined): void {
  el.hidden = !usage?.runs;
  if (!usage?.runs) {
    el.textContent = '';
    el.removeAttribute('title');
    return;
  }
  const tokens = usage.prompt_tokens + usage.completion_tokens;
  const short = tokens >= 10_000 ? `${Math.round(tokens / 1000)}k` : n(tokens);
  const cost = usage.cost_usd === null ? '' : formatUsd(usage.cost_usd);
  const unpriced = usage.unpriced_runs ? `; ${usage.unpriced_runs} of ${usage.runs} runs have no price in llm_prices` : '';
  el.textContent = [`${short} tokens`, cost || 'cost unknown'].join(' · ') + (cost && usage.unpriced_runs ? '+' : '');
  el.title = `This session: ${n(tokens)} tokens (${n(usage.prompt_tokens)} in · ${n(usage.completion_tokens)} out) over ${usage.runs} runs${cost ? `, ${cost}` : ''}${unpriced}`;
  el.setAttribute('aria-label', el.title);
}
