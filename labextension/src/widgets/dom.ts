/**
 * Tiny DOM helpers. Server-supplied text only ever goes in through `textContent`
 * (never innerHTML): a tool output or a paper title containing <script> stays text.
 */
import { diffLines } from '../notebookBridge';
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
  let rest = markdownAsText(snippet);
  while (rest.length > 0) {
    const start = rest.indexOf(MARK_START);
    if (start < 0) {
      host.appendChild(document.createTextNode(visibleText(rest)));
      break;
    }
    const end = rest.indexOf(MARK_END, start + 1);
    if (end < 0) {
      host.appendChild(document.createTextNode(visibleText(rest.replace(MARK_START, ''))));
      break;
    }
    if (start > 0) {
      host.appendChild(document.createTextNode(visibleText(rest.slice(0, start))));
    }
    const mark = document.createElement('mark');
    mark.textContent = visibleText(rest.slice(start + 1, end));
    host.appendChild(mark);
    rest = rest.slice(end + 1);
  }
}

/**
 * A Markdown snippet as the words a reader sees: no `**`, backticks, heading `#`s, table pipes
 * and rules, `[text](url)` as its text. A snippet is a window into a message, so its syntax is
 * often cut in half; this only drops marks, never the words (or the « » match markers).
 */
export function markdownAsText(text: string): string {
  return text
    .replace(/!?\[([^\]\n]*)\]\([^)\n]*\)/g, '$1') // [text](url), ![alt](src)
    .replace(/^\s{0,3}#{1,6}\s+/gm, '') // heading marks
    .replace(/^[ \t]*\|?[ \t]*:?-{3,}:?[ \t]*(\|[ \t]*:?-{3,}:?[ \t]*)*\|?[ \t]*$/gm, '') // a table's rule row
    .replace(/[ \t]*\|[ \t]*/g, ' · ') // table cells
    .replace(/(\*\*|__|~~|`+)/g, '') // strong, strike, code
    .replace(/(^|[\s(«])[*_](?=\S)|(?<=\S)[*_](?=[\s).,;:!?»]|$)/g, '$1') // emphasis
    .replace(/^[ \t]*(?:[-*+]|\d+\.)[ \t]+/gm, '') // list bullets
    .replace(/^(?: · )+|(?: · )+$/gm, '')
    .replace(/[ \t]{2,}/g, ' ')
    .trim();
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

/**
 * Characters that hide or disguise text: C0/C1 controls (but newline and tab), bidi
 * overrides and isolates, zero-width and line/paragraph separators, the BOM. A command shown
 * for approval must not read differently from what runs (U+202E can reverse it on screen).
 */
// eslint-disable-next-line no-control-regex
export const HIDDEN_CHARS = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u2069\ufeff]/g;

/** `\x1b` / `\u202e`: how a hidden character is shown. */
export function escapeChar(c: string): string {
  const code = c.charCodeAt(0);
  return code < 0x100 ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u${code.toString(16).padStart(4, '0')}`;
}

/** The text with every hidden character replaced by its visible escape (for one-line labels). */
export function visibleText(text: string): string {
  return text.replace(HIDDEN_CHARS, escapeChar);
}

/** How many hidden characters the text holds. */
export function countHidden(text: string): number {
  return (text.match(HIDDEN_CHARS) ?? []).length;
}

/**
 * Fill `host` with `text`, each hidden character shown as a marked escape
 * (`<span class="jp-Astro-esc">\u202e</span>`), built through the DOM.
 */
export function renderVisible(host: HTMLElement, text: string): void {
  host.textContent = '';
  let last = 0;
  const frag = document.createDocumentFragment();
  for (const m of text.matchAll(HIDDEN_CHARS)) {
    const i = m.index ?? 0;
    if (i > last) {
      frag.appendChild(document.createTextNode(text.slice(last, i)));
    }
    const esc = document.createElement('span');
    esc.className = 'jp-Astro-esc';
    esc.textContent = escapeChar(m[0]);
    esc.title = 'hidden character';
    frag.appendChild(esc);
    last = i + m[0].length;
  }
  if (last < text.length) {
    frag.appendChild(document.createTextNode(text.slice(last)));
  }
  host.appendChild(frag);
}

/**
 * A line diff of a cell (old → new) as a <pre>: removed lines in <del>, added in <ins> (so a screen reader
 * says which is which, not only the colour), each prefixed "-"/"+", hidden characters shown as escapes.
 */
export function renderDiff(before: string, after: string, className: string): HTMLPreElement {
  const pre = h('pre', { class: `jp-Astro-pre jp-Astro-diff ${className}` });
  for (const { op, text } of diffLines(before, after)) {
    const tag = op === '-' ? 'del' : op === '+' ? 'ins' : 'span';
    const cls = op === '-' ? 'jp-Astro-diff-del' : op === '+' ? 'jp-Astro-diff-add' : 'jp-Astro-diff-same';
    pre.appendChild(h(tag, { class: cls, text: `${op} ${visibleText(text)}\n` }));
  }
  return pre;
}

/** "2 lines removed, 1 added": what a diff changes, in words. */
export function diffSummary(before: string, after: string): string {
  const ops = diffLines(before, after);
  const removed = ops.filter(o => o.op === '-').length;
  const added = ops.filter(o => o.op === '+').length;
  if (!removed && !added) {
    return 'no change';
  }
  return `${removed} line${removed === 1 ? '' : 's'} removed, ${added} added`;
}

/** Argument names that say what a call is about, most telling first. */
const KEY_ARGS = [
  'command', 'name', 'query', 'q', 'paper_id', 'bibcode', 'arxiv_id', 'identifier', 'id', 'doi', 'url',
  'path', 'file_path', 'notebook', 'pattern', 'task', 'question', 'code', 'content', 'title', 'skill', 'tool'
];

/** The one argument a tool line shows (`M 31`, the paper id, the query), or ''. */
export function keyArgument(args: unknown): string {
  if (args === null || args === undefined) {
    return '';
  }
  if (typeof args !== 'object') {
    return String(args);
  }
  const record = args as Record<string, unknown>;
  for (const k of KEY_ARGS) {
    const v = record[k];
    if (typeof v === 'string' && v.trim()) {
      return v;
    }
    if (typeof v === 'number') {
      return String(v);
    }
  }
  for (const v of Object.values(record)) {
    if (typeof v === 'string' && v.trim()) {
      return v;
    }
  }
  return '';
}

/** "21:04" today, "3 Dec 21:04" otherwise. */
export function formatTime(ms: number | undefined, now = Date.now()): string {
  if (ms === undefined || !Number.isFinite(ms)) {
    return '';
  }
  const d = new Date(ms);
  const time = d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });
  if (new Date(now).toDateString() === d.toDateString()) {
    return time;
  }
  return `${d.toLocaleDateString([], { day: 'numeric', month: 'short' })} ${time}`;
}
