// @vitest-environment happy-dom
import { describe, expect, it } from 'vitest';
import { catalogOf, renderCatalog } from '../src/widgets/catalogView';

const meta = {
  catalog: {
    service: 'gaia',
    adql: 'SELECT TOP 3 ...',
    row_count: 1234,
    truncated: true,
    result_id: 'cat_0123456789abcdef',
    columns: [
      { name: 'source_id', unit: null, ucd: 'meta.id;meta.main', datatype: 'int64' },
      { name: 'ra', unit: 'deg', ucd: 'pos.eq.ra;meta.main', datatype: 'float64' }
    ],
    preview: [
      { source_id: 1, ra: 10.123456789012 },
      { source_id: 2, ra: null },
      { source_id: '<img src=x onerror=alert(1)>', ra: 3 }
    ],
    position: { ra: 'ra', dec: 'dec' }
  }
};

describe('catalog result view', () => {
  it('shows the count, a header with units, the preview rows and both download links', () => {
    const el = renderCatalog(catalogOf(meta)!, (id, f) => `/astro/api/catalog-results/${id}?format=${f}`);
    expect(el.querySelector('.jp-Astro-catalog-count')!.textContent).toBe('1,234 rows from gaia (truncated at maxrec) · first 3 shown');
    expect([...el.querySelectorAll('th')].map(t => t.textContent)).toEqual(['source_id', 'ra [deg]']);
    expect(el.querySelectorAll('tbody tr')).toHaveLength(3);
    expect(el.querySelectorAll('tbody tr')[0].querySelectorAll('td')[1].textContent).toBe('10.123457');
    const links = [...el.querySelectorAll('a')].map(a => [a.textContent, a.getAttribute('href')]);
    expect(links).toEqual([
      ['VOTable', '/astro/api/catalog-results/cat_0123456789abcdef?format=votable'],
      ['CSV', '/astro/api/catalog-results/cat_0123456789abcdef?format=csv']
    ]);
  });

  it('keeps hostile cell text as text and offers no link for a foreign id', () => {
    const bad = { catalog: { ...meta.catalog, result_id: '../../etc' } };
    const el = renderCatalog(catalogOf(bad)!, () => 'x');
    expect(el.querySelector('img')).toBeNull();
    expect(el.textContent).toContain('<img src=x onerror=alert(1)>');
    expect(el.querySelectorAll('a')).toHaveLength(0);
  });

  it('ignores metadata without a catalog', () => {
    expect(catalogOf({ path: '/x' })).toBeNull();
    expect(catalogOf({ catalog: { columns: 'no' } })).toBeNull();
  });
});
