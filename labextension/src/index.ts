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
import { IRenderMimeRegistry } from '@jupyterlab/rendermime';
import { LabIcon } from '@jupyterlab/ui-components';

import astroSvg from '../style/astro.svg';
import { AstroAPI } from './handler';
import { relativeToRoot } from './paths';
import { AstroPanel } from './widgets/panel';

export const astroIcon = new LabIcon({ name: 'astro-jupyter:astro', svgstr: astroSvg });

export const COMMAND_OPEN = 'astro:open';

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'astro-jupyter:plugin',
  description: 'Astro research agent sidebar: chat, live tool timeline, history search.',
  autoStart: true,
  requires: [IRenderMimeRegistry],
  optional: [IDocumentManager, ICommandPalette, ILayoutRestorer],
  activate: (
    app: JupyterFrontEnd,
    rendermime: IRenderMimeRegistry,
    docManager: IDocumentManager | null,
    palette: ICommandPalette | null,
    restorer: ILayoutRestorer | null
  ) => {
    const contents = app.serviceManager.contents;
    const open = (path: string) => {
      if (docManager) {
        docManager.openOrReveal(path);
      } else {
        void app.commands.execute('docmanager:open', { path });
      }
    };

    const panel = new AstroPanel({
      api: new AstroAPI(app.serviceManager.serverSettings),
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
        const stem = PathExt.basename(name, '.ipynb');
        let path = name;
        for (let i = 1; i < 1000; i++) {
          try {
            await contents.get(path, { content: false });
            path = `${stem}-${i}.ipynb`;
          } catch {
            break; // free name
          }
        }
        await contents.save(path, { type: 'notebook', format: 'json', content });
        open(path);
        return path;
      }
    });
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
