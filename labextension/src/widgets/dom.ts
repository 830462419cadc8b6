/**
 * Tiny DOM helpers. Server-supplied text only ever goes in through `textContent`
 * (never innerHTML): a tool output or a paper title containing <script> stays text.
 */
import { MARK_END, MARK_START } from '../tokens';

type Attrs = Record<string, string | number | boolean | undefined | null>;
type Child = Node | string | null | undefined | false;

export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: Attrs = {},
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) {
      continue;
    }
    if (name === 'class') {
      el.className = String(value);
    } else if (name === 'text') {
      el.textContent = String(value);
    } else {
      el.setAttribute(name, value === true ? '' : String(value));
    }
  }
  for (const child of children) {
    if (child === null || child === undefined || child === false) {
      continue;
    }
    el.appendChild(typeof child === 'string' ? document.createTextNode(child) : child);
  }
  return el;
}

export function button(label: string, onClick: (ev: MouseEvent) => void, attrs: Attrs = {}): HTMLButtonElement {
  const b = h('button', { type: 'button', class: 'jp-Astro-button', ...attrs, text: label });
  b.addEventListener('click', onClick);
  return b;
}

/**
 * Fill `host` with a search snippet: plain text, with the parts between « and » wrapped in
 * <mark> elements built through the DOM (no HTML from the server is parsed).
 */
export function renderSnippet(host: HTMLElement, snippet: string): void {
  host.textContent = '';
  let rest = snippet;
  while (rest.length > 0) {
    const start = rest.indexOf(MARK_START);
    if (start < 0) {
      host.appendChild(document.createTextNode(rest));
      break;
    }
    const end = rest.indexOf(MARK_END, start + 1);
    if (end < 0) {
      host.appendChild(document.createTextNode(rest.replace(MARK_START, '')));
      break;
    }
    if (start > 0) {
      host.appendChild(document.createTextNode(rest.slice(0, start)));
    }
    const mark = document.createElement('mark');
    mark.textContent = rest.slice(start + 1, end);
    host.appendChild(mark);
    rest = rest.slice(end + 1);
  }
}

export function formatBytes(n: number): string {
  if (n < 1024) {
    return `${n} B`;
  }
  if (n < 1024 * 1024) {
    return `${(n / 1024).toFixed(1)} kB`;
  }
  return `${(n / (1024 * 1024)).toFixed(1)} MB`;
}

export function formatDuration(ms: number | null): string {
  if (ms === null || !Number.isFinite(ms)) {
    return '';
  }
  return ms < 1000 ? `${Math.round(ms)} ms` : `${(ms / 1000).toFixed(ms < 10000 ? 2 : 1)} s`;
}

export function prettyJSON(value: unknown): string {
  if (typeof value === 'string') {
    return value;
  }
  try {
    return JSON.stringify(value, null, 2) ?? '';
  } catch {
    return String(value);
  }
}
