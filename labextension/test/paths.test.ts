import { describe, expect, it } from 'vitest';

import { relativeToRoot } from '../src/paths';

describe('relativeToRoot', () => {
  it('maps a file under the server root to a contents path', () => {
    expect(relativeToRoot('/home/u/work/astro_home/tool-results/call_1.txt', '/home/u/work')).toBe(
      'astro_home/tool-results/call_1.txt'
    );
    expect(relativeToRoot('/home/u/work/x.txt', '/home/u/work/')).toBe('x.txt');
  });

  it('refuses files outside the root, including a sibling with the same prefix', () => {
    expect(relativeToRoot('/home/u/.astro_jupyter/tool-results/a.txt', '/home/u/work')).toBeNull();
    expect(relativeToRoot('/home/u/work2/a.txt', '/home/u/work')).toBeNull();
  });

  it('keeps relative paths and handles Windows separators', () => {
    expect(relativeToRoot('./notes/a.md', '/root')).toBe('notes/a.md');
    expect(relativeToRoot('C:\\data\\root\\a.txt', 'C:\\data\\root')).toBe('a.txt');
  });
});
