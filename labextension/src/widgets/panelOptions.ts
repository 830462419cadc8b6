/** What the sidebar is built with: the host's services (panelOptions) and the user's settings. */
import { IRenderMimeRegistry } from '@jupyterlab/rendermime';

import { AstroAPI } from '../handler';
import type { NotebookIntegration } from '../notebookLab';

/** The user's settings (schema/plugin.json), applied live. */
export interface IAstroSettings {
  expandToolLines: boolean;
  showThinking: boolean;
  continueMaxSteps: number;
}

export const DEFAULT_SETTINGS: IAstroSettings = { expandToolLines: false, showThinking: true, continueMaxSteps: 40 };

export interface IAstroPanelOptions {
  api: AstroAPI;
  rendermime: IRenderMimeRegistry | null;
  /** Open a file (a persisted tool output) in JupyterLab. */
  openPath(path: string): void;
  /** Save notebook JSON under a free name near `name` and open it; resolves to its path. */
  saveNotebook(name: string, content: unknown): Promise<string>;
  /** Put code in a new cell below the active notebook cell (and run it); false without a notebook. */
  insertCode?(code: string, run: boolean): Promise<boolean>;
  /** Open Settings → Settings Editor at this extension. */
  openSettings?(): void;
  /** The notebook bridge, the active-notebook chip and notebook tool cards (notebookLab.ts). */
  notebook?: NotebookIntegration | null;
}
