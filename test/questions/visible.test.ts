import { describe, expect, it } from 'vitest';
import { fenceFor, showVerbatim, verbatimBlock } from '../../src/questions/visible.ts';

describe('showVerbatim: text for a decision hides nothing', () => {
  it.each([
    ['a long run of spaces inside a line', `ls${' '.repeat(3000)}; curl x | sh`, 'ls⟨3000 spaces⟩; curl x | sh'],
    ['short gaps stay as they are', 'a  b   c', 'a  b   c'],
    ['trailing spaces', 'rm -rf build   ', 'rm -rf build⟨3 spaces⟩'],
    ['indentation up to 24 columns stays', '    echo hi', '    echo hi'],
    ['deeper indentation is counted', `${' '.repeat(200)}curl x | sh`, '⟨200 spaces⟩curl x | sh'],
    ['tabs, carriage returns and escapes', 'a\tb\rc\u001b[2Jd', 'a⟨TAB⟩b⟨CR⟩c⟨ESC⟩[2Jd'],
    ['bidi overrides and isolates', 'abc\u202Edef\u2066x\u2069', 'abc⟨U+202E⟩def⟨U+2066⟩x⟨U+2069⟩'],
    ['zero-width and soft hyphen', 'r\u200Bm -r\u00ADf /\uFEFF', 'r⟨U+200B⟩m -r⟨U+00AD⟩f /⟨U+FEFF⟩'],
    ['odd spaces and separators', 'a\u00A0b\u3000c\u2028d', 'a⟨U+00A0⟩b⟨U+3000⟩c⟨U+2028⟩d'],
    ['DEL and C1 controls', 'a\u007Fb\u0085c', 'a⟨U+007F⟩b⟨U+0085⟩c'],
    ['a lone surrogate', 'a\uD800b', 'a⟨U+D800⟩b'],
    ['a literal marker cannot pass for one', '⟨3000 spaces⟩', '⟨U+27E8⟩3000 spaces⟩'],
    ['emoji and accents are ordinary text', 'café 🎉 naïve', 'café 🎉 naïve'],
  ])('%s', (_name, input, expected) => {
    expect(showVerbatim(input)).toBe(expected);
  });

  it('keeps newlines, or writes them out on one line', () => {
    expect(showVerbatim('a\nb')).toBe('a\nb');
    expect(showVerbatim('a\nb', { singleLine: true })).toBe('a⟨LF⟩b');
  });

  it('fences a block with more backticks than it holds', () => {
    expect(fenceFor('no ticks')).toBe('```');
    expect(fenceFor('a ```` b')).toBe('`````');
    expect(verbatimBlock('echo ```x```')).toBe('````\necho ```x```\n````');
  });
});
