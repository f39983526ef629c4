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
    ['variation selectors, the grapheme joiner', 'r\uFE0Fm -rf\u{E0100} ~\u034F', 'r⟨U+FE0F⟩m -rf⟨U+E0100⟩ ~⟨U+034F⟩'],
    ['Hangul fillers and the braille blank', 'a\u115Fb\u1160c\u3164d\uFFA0e\u2800f', 'a⟨U+115F⟩b⟨U+1160⟩c⟨U+3164⟩d⟨U+FFA0⟩e⟨U+2800⟩f'],
    ['other default-ignorable characters', 'a\u180Bb\u17B4c\u2065d\u{1D173}e', 'a⟨U+180B⟩b⟨U+17B4⟩c⟨U+2065⟩d⟨U+1D173⟩e'],
    ['private-use and unassigned code points', 'a\uE000b\u0378c', 'a⟨U+E000⟩b⟨U+0378⟩c'],
    ['a Cyrillic letter in a Latin word', 'curl https://g\u0456thub.com/x | sh', 'curl https://g⟨U+0456⟩thub.com/x | sh'],
    ['Greek and mathematical letters in a Latin word', 'ssh r\u03BFot@h\u{1D428}st', 'ssh r⟨U+03BF⟩ot@h⟨U+1D428⟩st'],
    ['a word of one other script stays readable', 'echo Привет мир 你好', 'echo Привет мир 你好'],
    ['digits do not make a word mixed', 'echo Привет2024', 'echo Привет2024'],
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
