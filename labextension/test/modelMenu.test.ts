// @vitest-environment happy-dom
/** The model menu opens above its chip (the chip stays visible), or below it when there is no room above. */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { CommandRegistry } from '@lumino/commands';

import { menuTop, ModelChooser } from '../src/widgets/modelChooser';

function rect(top: number, height: number, left = 10, width = 120): DOMRect {
  return { top, bottom: top + height, left, right: left + width, width, height, x: left, y: top, toJSON: () => ({}) } as DOMRect;
}

/** The menu's vertical extent from its transform and measured height. */
function placed(chooser: ModelChooser, height: number): { top: number; bottom: number } {
  const m = /translate\(\s*[-\d.]+px,\s*([-\d.]+)px/.exec(chooser.menu.node.style.transform);
  expect(m).not.toBeNull();
  const top = Number(m![1]);
  return { top, bottom: top + height };
}

async function chooserWith(models: string[]): Promise<ModelChooser> {
  const chooser = new ModelChooser({
    api: { models: async () => ({ current: models[0], models }), switchModel: async m => ({ current: m }) },
    commands: new CommandRegistry(),
    host: document.createElement('div'),
    info: () => undefined,
    error: () => undefined
  });
  chooser.chip = document.createElement('button');
  document.body.appendChild(chooser.chip);
  await chooser.load();
  return chooser;
}

describe('model menu placement', () => {
  let chooser: ModelChooser | null = null;
  afterEach(() => {
    chooser?.dispose();
    chooser = null;
    vi.restoreAllMocks();
  });

  it('opens above the chip at the bottom of the sidebar, leaving the chip visible', async () => {
    vi.spyOn(window, 'innerHeight', 'get').mockReturnValue(768);
    chooser = await chooserWith(['gpt-4o-mini', 'gpt-4o', 'llama3']);
    const chipRect = rect(700, 24);
    vi.spyOn(chooser.chip!, 'getBoundingClientRect').mockReturnValue(chipRect);
    vi.spyOn(chooser.menu.node, 'getBoundingClientRect').mockReturnValue(rect(0, 90));
    chooser.open(chooser.chip!);
    expect(chooser.menu.isAttached).toBe(true);
    const menu = placed(chooser, 90);
    expect(menu.bottom).toBeLessThanOrEqual(chipRect.top);
    expect(menu.top).toBeGreaterThanOrEqual(0);
  });

  it('opens below the chip when there is no room above', async () => {
    vi.spyOn(window, 'innerHeight', 'get').mockReturnValue(768);
    chooser = await chooserWith(['a', 'b']);
    const chipRect = rect(40, 24);
    vi.spyOn(chooser.chip!, 'getBoundingClientRect').mockReturnValue(chipRect);
    vi.spyOn(chooser.menu.node, 'getBoundingClientRect').mockReturnValue(rect(0, 90));
    chooser.open(chooser.chip!);
    const menu = placed(chooser, 90);
    expect(menu.top).toBeGreaterThanOrEqual(chipRect.bottom);
  });

  it('never covers the chip when neither side fits: the roomier side', () => {
    expect(menuTop({ top: 300, bottom: 324 }, 500, 500)).toBe(0); // above is roomier: capped there
    expect(menuTop({ top: 100, bottom: 124 }, 500, 500)).toBe(124);
  });
});
