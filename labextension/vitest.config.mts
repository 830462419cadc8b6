import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    environment: 'node',
    include: ['test/**/*.test.ts'],
    setupFiles: ['test/setup.ts'], // the web-components stub every DOM test needs
    testTimeout: 10000,
    // DOM tests (happy-dom) import the widgets, whose JupyterLab dependencies ship ESM with
    // extensionless imports: let Vite resolve them instead of Node.
    server: { deps: { inline: [/@jupyter\/web-components/, /@jupyterlab\/ui-components/] } }
  }
});
