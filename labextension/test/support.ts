/** What the sidebar's DOM tests share: a render context that does nothing but what a test asks. */
import { IRenderContext } from '../src/widgets/items';

export function renderContext(overrides: Partial<IRenderContext> = {}): IRenderContext {
  return {
    rendermime: null,
    answer: () => undefined,
    openPath: () => undefined,
    code: () => undefined,
    continueRun: () => undefined,
    expandTools: () => false,
    lazy: null,
    ...overrides
  };
}
