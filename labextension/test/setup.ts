/**
 * Runs before every test file. JupyterLab's toolbar registers FAST web components whose design
 * tokens need CSSOM features happy-dom lacks; the sidebar's DOM tests use none of them.
 */
import { vi } from 'vitest';

vi.mock('@jupyter/web-components', () => {
  const system = { register: () => system, withPrefix: () => system };
  const stub = (): unknown => system;
  return new Proxy({ addJupyterLabThemeChangeListener: () => undefined } as Record<string, unknown>, {
    get: (target, name) => (name in target ? target[name as string] : name === 'then' ? undefined : stub),
    has: () => true
  });
});
