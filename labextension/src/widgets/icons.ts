/**
 * Icons: JupyterLab's LabIcons where one fits, a few of our own SVGs where none does.
 * SVG only — emoji glyphs render as empty boxes where no emoji font is installed.
 */
import {
  bellIcon,
  buildIcon,
  checkIcon,
  circleEmptyIcon,
  closeIcon,
  collapseIcon,
  downloadIcon,
  editIcon,
  extensionIcon,
  fileIcon,
  infoIcon,
  kernelIcon,
  LabIcon,
  listIcon,
  notebookIcon,
  runningIcon,
  saveIcon,
  searchIcon,
  stopIcon,
  terminalIcon,
  userIcon,
  usersIcon
} from '@jupyterlab/ui-components';

import astroSvg from '../../style/astro.svg';

const svg = (body: string) =>
  `<svg xmlns="http://www.w3.org/2000/svg" width="16" height="16" viewBox="0 0 24 24"><g class="jp-icon3" fill="#616161">${body}</g></svg>`;

export const astroIcon = new LabIcon({ name: 'astro-jupyter:astro', svgstr: astroSvg });

/** A crosshair on a star: resolving a target by name. */
export const targetIcon = new LabIcon({
  name: 'astro-jupyter:target',
  svgstr: svg(
    '<path d="M11 2h2v3.1A7 7 0 0 1 18.9 11H22v2h-3.1A7 7 0 0 1 13 18.9V22h-2v-3.1A7 7 0 0 1 5.1 13H2v-2h3.1A7 7 0 0 1 11 5.1zm1 5a5 5 0 1 0 0 10 5 5 0 0 0 0-10z"/><circle cx="12" cy="12" r="1.8"/>'
  )
});

/** A page with lines: a paper's metadata or text. */
export const paperIcon = new LabIcon({
  name: 'astro-jupyter:paper',
  svgstr: svg(
    '<path d="M6 2h9l5 5v15H6zm8 1.5V8h4.5zM8 11v1.6h10V11zm0 3.5v1.6h10v-1.6zm0 3.5v1.6h7V18z"/>'
  )
});

/** An open circle arc: running (CSS turns it). */
export const spinnerIcon = new LabIcon({
  name: 'astro-jupyter:spinner',
  svgstr: svg('<path d="M12 3a9 9 0 1 0 9 9h-2.2A6.8 6.8 0 1 1 12 5.2z"/>')
});

/** A half-filled circle: a plan item in progress. */
export const halfCircleIcon = new LabIcon({
  name: 'astro-jupyter:half-circle',
  svgstr: svg('<path d="M12 3a9 9 0 1 0 0 18 9 9 0 0 0 0-18zm0 2v14a7 7 0 0 1 0-14z"/>')
});

/** A warning triangle (the step limit, an error banner). */
export const warnIcon = new LabIcon({
  name: 'astro-jupyter:warn',
  svgstr: svg('<path d="M12 2 1 21h22zm-1 7h2v6h-2zm0 8h2v2h-2z"/>')
});

/** A "send" paper plane. */
export const sendIcon = new LabIcon({
  name: 'astro-jupyter:send',
  svgstr: svg('<path d="M2 21 23 12 2 3v7l15 2-15 2z"/>')
});

/** A plus in a speech bubble: a new chat. */
export const newChatIcon = new LabIcon({
  name: 'astro-jupyter:new-chat',
  svgstr: svg(
    '<path d="M4 3h16a2 2 0 0 1 2 2v11a2 2 0 0 1-2 2H8l-5 4V5a2 2 0 0 1 1-2zm7 4v3H8v2h3v3h2v-3h3v-2h-3V7z"/>'
  )
});

const FAMILIES: Array<[RegExp, LabIcon]> = [
  [/^query_target$/, targetIcon],
  [/^(search_papers|rag_search|search_history|grep_files|glob_files)$/, searchIcon],
  [/^(get_paper_metadata|get_paper_content|parse_paper)$/, paperIcon],
  [/^download_paper$/, downloadIcon],
  [/^run_bash$/, terminalIcon],
  [/^read_file$/, fileIcon],
  [/^(file_write|file_edit)$/, editIcon],
  [/^kernel_/, kernelIcon],
  [/^notebook_/, notebookIcon],
  [/^(subagent|delegate_task|check_task|task_stop|synthesize|spawn_teammate|send_teammate_message|team_broadcast|check_team_inbox)$/, usersIcon],
  [/^todo_write$/, listIcon],
  [/^(save_note|save_memory)$/, saveIcon],
  [/^ask_user$/, userIcon],
  [/^(load_skill|load_tool)$/, extensionIcon],
  [/^compress_context$/, collapseIcon],
  [/^bg_task/, runningIcon]
];

/** The icon of a tool's family (one per family, a wrench for the rest). */
export function toolIcon(name: string): LabIcon {
  for (const [re, icon] of FAMILIES) {
    if (re.test(name)) {
      return icon;
    }
  }
  return buildIcon;
}

export const STATUS_ICON: Record<string, LabIcon> = {
  running: spinnerIcon,
  waiting: bellIcon,
  done: checkIcon,
  error: closeIcon,
  cancelled: stopIcon,
  interrupted: stopIcon,
  declined: stopIcon
};

export const TODO_ICON: Record<string, LabIcon> = {
  completed: checkIcon,
  done: checkIcon,
  in_progress: halfCircleIcon,
  pending: circleEmptyIcon
};

export { infoIcon, usersIcon };

/** A decorative icon element (the text beside it says the same). */
export function iconEl(icon: LabIcon, className = ''): HTMLElement {
  const el = icon.element({ tag: 'span', className: `jp-Astro-icon ${className}`.trim() });
  el.setAttribute('aria-hidden', 'true');
  return el;
}
