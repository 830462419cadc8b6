/**
 * A query_catalog / cone_search result in the sidebar: the row count, a compact scrollable table of
 * the preview rows (column units in the header) and download links (VOTable, CSV) to the owner-scoped
 * route `astro/api/catalog-results/{id}`. Built from the tool result's `metadata.catalog`; every value
 * goes in as text.
 */
import { h } from './dom';

export interface ICatalogColumn {
  name: string;
  unit?: string | null;
  ucd?: string | null;
  datatype?: string | null;
}

export interface ICatalogMeta {
  service: string;
  adql: string;
  row_count: number;
  truncated: boolean;
  result_id: string;
  columns: ICatalogColumn[];
  preview: Record<string, unknown>[];
  position?: { ra: string; dec: string } | null;
}

const RESULT_ID = /^cat_[0-9a-f]{16}$/;

/** `metadata.catalog` when it has the shape this view needs, else null (a foreign or broken result). */
export function catalogOf(metadata: Record<string, unknown> | undefined): ICatalogMeta | null {
  const c = metadata?.catalog as Partial<ICatalogMeta> | undefined;
  if (!c || typeof c !== 'object' || !Array.isArray(c.columns) || !Array.isArray(c.preview) || typeof c.row_count !== 'number') {
    return null;
  }
  return c as ICatalogMeta;
}

function cellText(value: unknown): string {
  if (value === null || value === undefined) {
    return '';
  }
  if (typeof value === 'number') {
    return Number.isInteger(value) ? String(value) : String(Number(value.toPrecision(8)));
  }
  return typeof value === 'string' ? value : JSON.stringify(value);
}

/** The table view; `urlFor(id, format)` gives the download URL (absent for an id that is not a stored result's). */
export function renderCatalog(cat: ICatalogMeta, urlFor: (id: string, format: 'votable' | 'csv') => string): HTMLElement {
  const shown = cat.preview.length;
  const summary = `${cat.row_count.toLocaleString('en-US')} row${cat.row_count === 1 ? '' : 's'} from ${cat.service}` +
    (cat.truncated ? ' (truncated at maxrec)' : '') + (shown < cat.row_count ? ` · first ${shown} shown` : '');
  const links = h('span', { class: 'jp-Astro-catalog-links' });
  if (RESULT_ID.test(cat.result_id)) {
    for (const [format, label] of [['votable', 'VOTable'], ['csv', 'CSV']] as const) {
      links.append(h('a', { class: 'jp-Astro-link', href: urlFor(cat.result_id, format), download: `${cat.result_id}.${format === 'csv' ? 'csv' : 'vot'}`, text: label }), ' ');
    }
  }
  const head = h('tr', {}, ...cat.columns.map(c => h('th', { title: [c.ucd, c.datatype].filter(Boolean).join(' · '), text: c.unit ? `${c.name} [${c.unit}]` : c.name })));
  const body = h('tbody', {}, ...cat.preview.map(row => h('tr', {}, ...cat.columns.map(c => h('td', { text: cellText(row[c.name]) })))));
  return h(
    'div',
    { class: 'jp-Astro-catalog', 'data-result-id': cat.result_id },
    h('div', { class: 'jp-Astro-catalog-summary' }, h('span', { class: 'jp-Astro-catalog-count', text: summary }), ' ', links),
    h('div', { class: 'jp-Astro-catalog-scroll' }, h('table', { class: 'jp-Astro-catalog-table' }, h('thead', {}, head), body))
  );
}
