// @vitest-environment happy-dom
import { describe, expect, it } from 'vitest';

import { markdownAsText, renderSnippet } from '../src/widgets/dom';

describe('search snippets', () => {
  it('show the words of a Markdown message, not its syntax', () => {
    expect(markdownAsText('## 3 Results\nThe **halo** is `cored`; see [Burkert](https://x.org/b) and *NFW*.')).toBe(
      '3 Results\nThe halo is cored; see Burkert and NFW.'
    );
    expect(markdownAsText('| target | RA |\n|---|---|\n| M 87 | 187.706 |')).toBe('target · RA\n\nM 87 · 187.706');
    expect(markdownAsText('- first item\n1. second_item with snake_case')).toBe('first item\nsecond_item with snake_case');
  });

  it('keeps the match markers (a cut-off "**" next to a match does not show)', () => {
    const host = document.createElement('span');
    renderSnippet(host, '…the **«quokkanebula»** glows');
    expect(host.textContent).toBe('…the quokkanebula glows');
    expect(host.querySelector('mark')?.textContent).toBe('quokkanebula');
  });
});

describe('sessions search', () => {
  it('does not say "No session titles match" over a title the search found', async () => {
    const { SessionsView } = await import('../src/widgets/searchView');
    const hit = { session_id: 's1', session_title: 'Galaxy survey', role: 'session', snippet: '«Galaxy» survey', created_at: '' };
    const view = new SessionsView({
      search: async () => [hit as any],
      sessions: () => [{ id: 's1', title: 'Galaxy survey' } as any],
      currentSessionId: () => null,
      openSession: () => undefined,
      open: () => undefined,
      rename: () => undefined,
      remove: () => undefined,
      exportSession: () => undefined
    });
    document.body.appendChild(view.node);
    view.input.value = 'galaxies'; // the letters are not in the title; the words (stemmed) are
    view.input.dispatchEvent(new Event('input'));
    expect(view.node.textContent).toContain('No session titles match.');
    view.input.dispatchEvent(new KeyboardEvent('keydown', { key: 'Enter' }));
    await new Promise(resolve => setTimeout(resolve, 20));
    expect(view.node.querySelector('.jp-Astro-search-group')?.textContent).toContain('Galaxy survey');
    expect(view.node.textContent).not.toContain('No session titles match.');
  });
});
