// What a person approves is exactly what runs: text shown for a decision hides nothing. Characters that render as
// nothing, reorder the line or push the rest out of sight are written out as markers instead.

/**
 * Characters that may render as nothing: controls (C0 but newline, DEL, C1), format characters (zero-width, bidi, soft
 * hyphen, tags), every other default-ignorable one (variation selectors, U+034F, the Hangul fillers), the braille
 * blank, and private-use and unassigned code points (which a font may draw as anything or nothing).
 */
const INVISIBLE = /[\u0000-\u0009\u000B-\u001F\u007F-\u009F\p{Cf}\p{Default_Ignorable_Code_Point}\u2800\p{Co}\p{Cn}]/u;
/** A word: letters, marks, digits and underscores. */
const WORD = /[\p{L}\p{M}\p{N}_]+/gu;
/** A letter of a script other than Latin (Cyrillic, Greek, mathematical letters...). */
const NON_LATIN_LETTER = /(?=\p{L})\P{Script=Latin}/u;
/** Spaces other than the plain one, and the line and paragraph separators. */
const ODD_SPACE = /[\p{Zs}\u2028\u2029]/u;
const NAMES: Record<number, string> = { 0x09: 'TAB', 0x0d: 'CR', 0x1b: 'ESC', 0x0a: 'LF' };
/** Longest indentation shown as is; deeper indentation is counted. */
const MAX_INDENT = 24;
/** Longest run of blanks inside a line shown as is. */
const MAX_GAP = 3;

function marker(codePoint: number): string {
  return `⟨${NAMES[codePoint] ?? `U+${codePoint.toString(16).toUpperCase().padStart(4, '0')}`}⟩`;
}

/**
 * `text` with nothing hidden: invisible characters, and letters of another script inside a word of ASCII letters, as
 * `⟨U+0456⟩`; tabs as `⟨TAB⟩`; deep indentation and long runs of spaces as `⟨3000 spaces⟩`. Newlines stay newlines
 * unless `singleLine` (then `⟨LF⟩`). A literal `⟨` is written as a marker too, so no marker can be faked.
 */
export function showVerbatim(text: string, options: { singleLine?: boolean } = {}): string {
  return text
    .split('\n')
    .map((line) => showLine(line))
    .join(options.singleLine ? marker(0x0a) : '\n');
}

/**
 * Where a word mixes ASCII letters with letters of another script, those letters are look-alikes in the making
 * (`gіthub` with a Cyrillic і): their positions, to be written out. Words of one script (`Привет`) are left alone.
 */
function lookAlikes(line: string): Set<number> {
  const found = new Set<number>();
  for (const word of line.matchAll(WORD)) {
    if (!/[A-Za-z]/.test(word[0])) continue;
    for (let i = 0; i < word[0].length; ) {
      const char = String.fromCodePoint(word[0].codePointAt(i)!);
      if (NON_LATIN_LETTER.test(char)) found.add(word.index + i);
      i += char.length;
    }
  }
  return found;
}

function showLine(line: string): string {
  const mixed = lookAlikes(line);
  let out = '';
  let i = 0;
  // Indentation: plain spaces up to MAX_INDENT are kept, so code stays readable.
  const indent = /^ */.exec(line)![0].length;
  if (indent > 0) {
    out += indent <= MAX_INDENT ? ' '.repeat(indent) : `⟨${indent} spaces⟩`;
    i = indent;
  }
  while (i < line.length) {
    const char = String.fromCodePoint(line.codePointAt(i)!);
    if (char === ' ') {
      let end = i;
      while (line[end] === ' ') end++;
      const run = end - i;
      // A run at the end of the line is shown too: nothing may follow unseen, and nothing may look absent.
      out += run > MAX_GAP || end === line.length ? `⟨${run} space${run === 1 ? '' : 's'}⟩` : ' '.repeat(run);
      i = end;
      continue;
    }
    const codePoint = char.codePointAt(0)!;
    if (char === '⟨' || mixed.has(i) || INVISIBLE.test(char) || ODD_SPACE.test(char) || (codePoint >= 0xd800 && codePoint <= 0xdfff)) {
      out += marker(codePoint);
    } else {
      out += char;
    }
    i += char.length;
  }
  return out;
}

/** A fence of backticks longer than any run inside `text`, so nothing in it can end the code block early. */
export function fenceFor(text: string): string {
  const longest = Math.max(2, ...(text.match(/`+/g) ?? []).map((run) => run.length));
  return '`'.repeat(longest + 1);
}

/** Text already made visible, in a code block. */
export function codeBlock(shown: string): string {
  const fence = fenceFor(shown);
  return `${fence}\n${shown}\n${fence}`;
}

/** `text` shown verbatim in a code block. */
export function verbatimBlock(text: string): string {
  return codeBlock(showVerbatim(text));
}
