/**
 * The sidebar's fixed chrome, built once: the toolbar header (title, New chat, Sessions,
 * Export, "…", the message line) and the composer (prompt, model chip, status, Send⇄Stop).
 * The panel (panel.ts) passes what the controls do and keeps the returned elements.
 */
import { downloadIcon, ellipsesIcon, historyIcon, LabIcon, Toolbar } from '@jupyterlab/ui-components';
import { Panel, Widget } from '@lumino/widgets';

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
}

export function buildHeader(actions: IHeaderActions): IHeader {
  const header = new Panel();
  header.addClass('jp-Astro-header');
  const toolbar = new Toolbar();
  toolbar.addClass('jp-Astro-toolbar');
  const title = new Widget();
  title.addClass('jp-Astro-title');
  toolbar.addItem('title', title);
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
  return { widget: header, toolbar, titleEl: title.node, sessionsButton, exportButton, moreButton, message };
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
  composer.node.append(
    h('div', { class: 'jp-Astro-composer-box' }, input, h('div', { class: 'jp-Astro-composer-actions' }, modelChip, statusChip, sendButton))
  );
  return { widget: composer, input, sendButton, modelChip, statusChip };
}
