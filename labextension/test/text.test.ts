/** What untrusted text looks like on screen: hidden characters become visible escapes,
 * a tool line picks the telling argument, an export never overwrites a file. */
import { describe, expect, it } from 'vitest';

import { freeName } from '../src/paths';
import { countHidden, keyArgument, visibleText } from '../src/widgets/dom';

describe('visible text', () => {
  it('shows escape and bidi characters as escapes, keeps newlines and tabs', () => {
    expect(visibleText('echo ok\x1b[2J')).toBe('echo ok\\x1b[2J');
    expect(visibleText('rm -rf /tmp/\u202Etxt.exe')).toBe('rm -rf /tmp/\\u202etxt.exe');
    expect(visibleText('a\u200bb\u2066c\u2069\ufeff')).toBe('a\\u200bb\\u2066c\\u2069\\ufeff');
    expect(visibleText('line 1\n\tline 2')).toBe('line 1\n\tline 2');
    expect(visibleText('\x00\x7f\x9b')).toBe('\\x00\\x7f\\x9b');
    expect(countHidden('x\u202e\x1by')).toBe(2);
  });

  it('picks the key argument of a call', () => {
    expect(keyArgument({ name: 'M 31' })).toBe('M 31');
    expect(keyArgument({ limit: 5, query: 'fast radio bursts' })).toBe('fast radio bursts');
    expect(keyArgument({ command: 'ls', timeout: 3 })).toBe('ls');
    expect(keyArgument({ paper_id: '2103.00001' })).toBe('2103.00001');
    expect(keyArgument({ other: 'value' })).toBe('value');
    expect(keyArgument(null)).toBe('');
    expect(keyArgument({ n: { deep: 1 } })).toBe('');
  });

  it('finds a free notebook name from one listing', () => {
    expect(freeName('a.ipynb', new Set())).toBe('a.ipynb');
    expect(freeName('a.ipynb', new Set(['a.ipynb', 'a-1.ipynb']))).toBe('a-2.ipynb');
  });
});
