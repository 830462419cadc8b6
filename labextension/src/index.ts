/**
 * The astro-jupyter JupyterLab plugin: an "Astro" panel in the left sidebar and the
 * command "Astro: Open research agent" in the palette.
 */
import {
  ILayoutRestorer,
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { Dialog, ICommandPalette, showDialog } from '@jupyterlab/apputils';
import { PageConfig, PathExt } from '@jupyterlab/coreutils';
import { IDocumentManager } from '@jupyterlab/docmanager';
import { INotebookTracker } from '@jupyterlab/notebook';
import { IRenderMimeRegistry } from '@jupyterlab/rendermime';
import { ISettingRegistry } from '@jupyterlab/settingregistry';

import { AstroAPI } from './handler';
import { NotebookIntegration } from './notebookLab';
import { freeName, relativeToRoot } from './paths';
import { astroIcon } from './widgets/icons';
import { AstroPanel, DEFAULT_SETTINGS, IAstroSettings } from './widgets/panel';

export { astroIcon };

const PLUGIN_ID = 'astro-jupyter:plugin';


export const COMMAND_OPEN = 'astro:open';

const plugin: JupyterFrontEndPlugin<void> = {
  id: PLUGIN_ID,
  description: 'Astro research agent sidebar: chat, live tool timeline, history search.',
  autoStart: true,
  requires: [IRenderMimeRegistry],
  optional: [IDocumentManager, ICommandPalette, ILayoutRestorer, ISettingRegistry, INotebookTracker],
  activate: (
    app: JupyterFrontEnd,
    rendermime: IRenderMimeRegistry,
    docManager: IDocumentManager | null,
    palette: ICommandPalette | null,
    restorer: ILayoutRestorer | null,
    settingRegistry: ISettingRegistry | null,
    notebooks: INotebookTracker | null
  ) => {
    const contents = app.serviceManager.contents;
    const open = (path: string) => {
      if (docManager) {
        docManager.openOrReveal(path);
      } else {
        void app.commands.execute('docmanager:open', { path });
      }
    };

    const api = new AstroAPI(app.serviceManager.serverSettings);
    const notebook = notebooks
      ? new NotebookIntegration({
          tracker: notebooks,
          answer: (runId, requestId, answer) => api.answer(runId, requestId, answer),
          activate: widget => app.shell.activateById(widget.id),
          open: path => docManager?.openOrReveal(path)
        })
      : null;
    const panel = new AstroPanel({
      api,
      notebook,
      rendermime,
      openPath: (path: string) => {
        const rel = relativeToRoot(path, PageConfig.getOption('serverRoot'));
        if (rel !== null) {
          open(rel);
          return;
        }
        void showDialog({
          title: 'Full tool output',
          body: `The output was saved outside the Jupyter root, at:\n${path}`,
          buttons: [Dialog.okButton()]
        });
      },
      saveNotebook: async (name: string, content: unknown) => {
        // One listing of the root instead of probing each name (a probe is a 404 in the console).
        const listing = await contents.get('', { content: true });
        const taken = new Set<string>(((listing.content ?? []) as Array<{ name: string }>).map(f => f.name));
        const path = freeName(PathExt.basename(name), taken);
        await contents.save(path, { type: 'notebook', format: 'json', content });
        open(path);
        return path;
      },
      insertCode: async (code: string, run: boolean) => (notebook ? notebook.insertCode(code, run) : false),
      openSettings: settingRegistry
        ? () => void app.commands.execute('settingeditor:open', { query: 'Astro research agent' })
        : undefined
    });
    if (notebooks) {
      const update = () => panel.setNotebookAvailable(!!notebooks.currentWidget);
      notebooks.currentChanged.connect(update);
      update();
    }
    if (settingRegistry) {
      void settingRegistry
        .load(PLUGIN_ID)
        .then(settings => {
          const apply = () => panel.configure({ ...DEFAULT_SETTINGS, ...(settings.composite as Partial<IAstroSettings>) });
          settings.changed.connect(apply);
          apply();
        })
        .catch(reason => console.warn('astro: could not load the settings', reason));
    }
    panel.title.icon = astroIcon;
    app.shell.add(panel, 'left', { rank: 600 });
    restorer?.add(panel, 'astro-jupyter-panel');

    app.commands.addCommand(COMMAND_OPEN, {
      label: 'Astro: Open research agent',
      caption: 'Open the Astro research agent sidebar',
      icon: astroIcon,
      execute: () => {
        app.shell.activateById(panel.id);
        panel.node.querySelector<HTMLTextAreaElement>('.jp-Astro-prompt')?.focus();
      }
    });
    palette?.addItem({ command: COMMAND_OPEN, category: 'Astro' });

    void app.restored.then(() => panel.initialize());
  }
};

export default plugin;
