import {
  ILayoutRestorer,
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { ICommandPalette } from '@jupyterlab/apputils';
import { LabIcon } from '@jupyterlab/ui-components';
import { Widget } from '@lumino/widgets';

import astroSvg from '../style/astro.svg';

export const astroIcon = new LabIcon({ name: 'astro-jupyter:astro', svgstr: astroSvg });

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'astro-jupyter:plugin',
  description: 'Astro research agent sidebar',
  autoStart: true,
  optional: [ICommandPalette, ILayoutRestorer],
  activate: (app: JupyterFrontEnd, palette: ICommandPalette | null, restorer: ILayoutRestorer | null) => {
    const panel = new Widget();
    panel.id = 'astro-jupyter-panel';
    panel.addClass('jp-AstroPanel');
    panel.title.icon = astroIcon;
    panel.title.caption = 'Astro research agent';
    panel.node.textContent = 'Astro';
    app.shell.add(panel, 'left', { rank: 600 });
    if (restorer) {
      restorer.add(panel, 'astro-jupyter-panel');
    }
    app.commands.addCommand('astro:open', {
      label: 'Astro: Open research agent',
      icon: astroIcon,
      execute: () => app.shell.activateById(panel.id)
    });
    palette?.addItem({ command: 'astro:open', category: 'Astro' });
  }
};

export default plugin;
