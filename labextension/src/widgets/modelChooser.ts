/**
 * The model chip and its menu: which model the caller's next runs use, the endpoint's models
 * to switch to (`GET/PUT astro/api/models`), and why none are listed when the endpoint is down.
 */
import { CommandRegistry } from '@lumino/commands';
import { Menu } from '@lumino/widgets';

import { IModelsReply } from '../tokens';

export interface IModelChooserOptions {
  api: { models(): Promise<IModelsReply>; switchModel(model: string): Promise<{ current: string }> };
  commands: CommandRegistry;
  /** Carries `data-model` (the current model), for tests and styles. */
  host: HTMLElement;
  info(text: string): void;
  error(prefix: string, error: unknown): void;
  /** After each load: whether the server has no LLM endpoint configured (`source: "none"`). */
  loaded?(noEndpoint: boolean): void;
}

export class ModelChooser {
  readonly menu: Menu;
  /** The composer's chip (set once the composer is built). */
  chip: HTMLButtonElement | null = null;
  private models: string[] = [];
  private current = '';
  private warning = '';

  constructor(private readonly options: IModelChooserOptions) {
    options.commands.addCommand('astro:model', {
      label: args => String(args.name ?? ''),
      isToggled: args => args.name === this.current,
      execute: args => void this.switch(String(args.name ?? ''))
    });
    this.menu = new Menu({ commands: options.commands });
    this.menu.addClass('jp-Astro-menu');
    this.menu.title.label = 'Model';
  }

  async load(): Promise<void> {
    try {
      const reply = await this.options.api.models();
      this.models = reply.models.length ? reply.models : [reply.current];
      this.current = reply.current;
      this.warning = reply.warning ?? '';
      this.options.loaded?.(reply.source === 'none');
    } catch (error) {
      this.models = [];
      this.current = '';
      this.warning = error instanceof Error ? error.message : String(error);
    }
    this.render();
  }

  render(): void {
    this.menu.clearItems();
    for (const name of this.models) {
      this.menu.addItem({ command: 'astro:model', args: { name } });
    }
    this.options.host.dataset.model = this.current;
    const chip = this.chip;
    if (!chip) {
      return;
    }
    chip.textContent = this.current || 'model unavailable';
    chip.title = this.current
      ? `Model: ${this.current}${this.warning ? ` (${this.warning})` : ''} — click to switch`
      : this.warning;
    chip.setAttribute('aria-label', `Model: ${this.current || 'unavailable'}. Switch model`);
  }

  /**
   * Open the menu above `anchor` (the chip), so the chip stays in view; below it when there is
   * no room above. Lumino places a menu's top-left corner, so the menu is measured once open.
   */
  open(anchor: HTMLElement): void {
    const r = anchor.getBoundingClientRect();
    // at the top with forceY: Lumino then lets it be as tall as the window, so its height is its own
    this.menu.open(r.left, 0, { forceY: true });
    const node = this.menu.node;
    const height = node.getBoundingClientRect().height;
    const y = menuTop(r, height, window.innerHeight);
    const x = node.getBoundingClientRect().left;
    node.style.transform = `translate(${Math.max(0, x)}px, ${y}px)`;
    node.style.maxHeight = `${Math.max(r.top, window.innerHeight - r.bottom)}px`;
  }

  async switch(model: string): Promise<void> {
    if (!model || model === this.current) {
      return;
    }
    try {
      const reply = await this.options.api.switchModel(model);
      this.current = reply.current;
      this.render();
      this.options.info(`Model: ${reply.current}`);
    } catch (error) {
      this.options.error('Could not switch the model', error);
      void this.load();
    }
  }

  dispose(): void {
    this.menu.dispose();
  }
}

/** Where a menu of `height` goes by a chip at `chip`: above it if it fits, else below, else the roomier side. */
export function menuTop(chip: { top: number; bottom: number }, height: number, viewport: number): number {
  if (height <= chip.top) {
    return chip.top - height;
  }
  if (chip.bottom + height <= viewport || viewport - chip.bottom >= chip.top) {
    return chip.bottom;
  }
  return 0;
}
