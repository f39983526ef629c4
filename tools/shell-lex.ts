// The part of reading a script that shell-quote leaves out: it takes new lines for spaces, a `#` inside a word for
// a comment, and knows nothing of `$(...)`, backticks, `<(...)` or here-documents. This pass rewrites a script
// into text shell-quote reads the way `sh` would: new lines become `;`, comments go, a here-document becomes a
// here-string holding its body, and each substitution becomes a marker whose script is kept apart.

const SUBSTITUTION = '\u0002';
// Where a `#` starts a comment: at the start of a word.
const WORD_BREAK = /[\s;&|()<>]$/;

export interface Lexed {
  text: string;
  /** The scripts of the substitutions, in the order of their markers (`\u0002<index>\u0002`). */
  substitutions: string[];
}

export function lexScript(script: string): Lexed {
  const substitutions: string[] = [];
  const { text } = lexUntil(script, 0, undefined, substitutions);
  return { text, substitutions };
}

interface PendingHeredoc {
  delimiter: string;
  quoted: boolean;
  stripTabs: boolean;
  slot: number;
}

/** Reads `src` from `start` to `end` (`)` of `$(`, a closing backtick) or to its end. */
function lexUntil(src: string, start: number, end: ')' | '`' | undefined, substitutions: string[]): { text: string; next: number } {
  const parts: string[] = [];
  const heredocs: PendingHeredoc[] = [];
  let parens = 0;
  let i = start;
  const substitute = (script: string) => {
    substitutions.push(script);
    return `${SUBSTITUTION}${substitutions.length - 1}${SUBSTITUTION}`;
  };

  while (i < src.length) {
    const c = src[i]!;
    const next = src[i + 1];
    if (end === '`' && c === '`') return { text: parts.join(''), next: i + 1 };
    if (end === ')' && c === ')' && parens === 0) return { text: parts.join(''), next: i + 1 };

    if (c === '\\') {
      // A backslash before a new line joins the lines; before anything else it quotes it.
      if (next !== '\n') parts.push(src.slice(i, i + 2));
      i += 2;
    } else if (c === "'") {
      const close = src.indexOf("'", i + 1);
      const stop = close < 0 ? src.length : close + 1;
      parts.push(src.slice(i, stop));
      i = stop;
    } else if (c === '$' && next === "'") {
      const close = /(?:\\[\s\S]|[^\\'])*'/y;
      close.lastIndex = i + 2;
      const stop = close.exec(src) ? close.lastIndex : src.length;
      parts.push(src.slice(i, stop));
      i = stop;
    } else if (c === '"') {
      const quoted = lexDoubleQuoted(src, i + 1, substitutions);
      parts.push(`"${quoted.text}"`);
      i = quoted.next;
    } else if (c === '$' && next === '(') {
      const inner = lexUntil(src, i + 2, ')', substitutions);
      parts.push(substitute(src.slice(i + 2, inner.next - 1)));
      i = inner.next;
    } else if (c === '`') {
      const inner = lexUntil(src, i + 1, '`', substitutions);
      parts.push(substitute(src.slice(i + 1, inner.next - 1)));
      i = inner.next;
    } else if ((c === '<' || c === '>') && next === '(') {
      const inner = lexUntil(src, i + 2, ')', substitutions);
      parts.push(` ${substitute(src.slice(i + 2, inner.next - 1))} `);
      i = inner.next;
    } else if (c === '$' && next === '{') {
      const close = src.indexOf('}', i + 2);
      const stop = close < 0 ? src.length : close + 1;
      parts.push(src.slice(i, stop));
      i = stop;
    } else if (c === '<' && next === '<' && src[i + 2] === '<') {
      parts.push('<<<');
      i += 3;
    } else if (c === '<' && next === '<') {
      const heredoc = readHeredocStart(src, i);
      heredocs.push({ ...heredoc.pending, slot: parts.length + 1 });
      parts.push('<<< ', '');
      i = heredoc.next;
    } else if (c === '#') {
      const before = lastChar(parts, false);
      if (before === '' || WORD_BREAK.test(before)) {
        while (i < src.length && src[i] !== '\n') i++;
      } else {
        // `a#b` is one word; shell-quote would start a comment there.
        parts.push(before === '$' ? '#' : '\\#');
        i++;
      }
    } else if (c === '\n') {
      i++;
      for (const heredoc of heredocs.splice(0)) {
        const body = readHeredocBody(src, i, heredoc);
        parts[heredoc.slot] = heredoc.quoted ? `'${body.text.replace(/'/g, `'\\''`)}'` : `"${lexDoubleQuoted(body.text, 0, substitutions, true).text}"`;
        i = body.next;
      }
      // A line ending in `|`, `&&` or `||` goes on to the next.
      parts.push(/[|&]/.test(lastChar(parts, true)) ? ' ' : ';');
    } else if (/\d/.test(c) && /^\s?$/.test(lastChar(parts, false)) && /^\d+[<>]/.test(src.slice(i, i + 12))) {
      // `2>/dev/null`: the descriptor is not a word of the command.
      i += /^\d+/.exec(src.slice(i))![0].length;
    } else {
      if (c === '(') parens++;
      if (c === ')') parens--;
      parts.push(c);
      i++;
    }
  }
  return { text: parts.join(''), next: src.length };
}

/**
 * The inside of a double-quoted string from `start` to its closing quote, substitutions made markers. For a
 * here-document body, quotes are plain characters and are escaped for shell-quote.
 */
function lexDoubleQuoted(src: string, start: number, substitutions: string[], heredocBody = false): { text: string; next: number } {
  let text = '';
  let i = start;
  while (i < src.length) {
    const c = src[i]!;
    if (c === '"' && !heredocBody) return { text, next: i + 1 };
    if (c === '"') {
      text += '\\"';
      i++;
    } else if (c === '\\') {
      text += src.slice(i, i + 2);
      i += 2;
    } else if (c === '$' && src[i + 1] === '(') {
      const inner = lexUntil(src, i + 2, ')', substitutions);
      substitutions.push(src.slice(i + 2, inner.next - 1));
      text += `${SUBSTITUTION}${substitutions.length - 1}${SUBSTITUTION}`;
      i = inner.next;
    } else if (c === '`') {
      const inner = lexUntil(src, i + 1, '`', substitutions);
      substitutions.push(src.slice(i + 1, inner.next - 1));
      text += `${SUBSTITUTION}${substitutions.length - 1}${SUBSTITUTION}`;
      i = inner.next;
    } else {
      text += c;
      i++;
    }
  }
  return { text, next: src.length };
}

/** The last character written so far (the last one that is not blank, with `skipBlanks`), or ''. */
function lastChar(parts: string[], skipBlanks: boolean): string {
  for (let p = parts.length - 1; p >= 0; p--) {
    const part = skipBlanks ? parts[p]!.trimEnd() : parts[p]!;
    if (part !== '') return part.at(-1)!;
  }
  return '';
}

/** `<<WORD`, `<<-WORD`, `<<'WORD'`: the delimiter, and whether the body is taken literally. */
function readHeredocStart(src: string, at: number): { pending: Omit<PendingHeredoc, 'slot'>; next: number } {
  let i = at + 2;
  const stripTabs = src[i] === '-';
  if (stripTabs) i++;
  while (src[i] === ' ' || src[i] === '\t') i++;
  const word = /^[^\s;&|()<>]*/.exec(src.slice(i))![0];
  return { pending: { delimiter: word.replace(/['"\\]/g, ''), quoted: /['"\\]/.test(word), stripTabs }, next: i + word.length };
}

function readHeredocBody(src: string, start: number, heredoc: PendingHeredoc): { text: string; next: number } {
  const lines: string[] = [];
  let i = start;
  while (i < src.length) {
    const newline = src.indexOf('\n', i);
    const stop = newline < 0 ? src.length : newline;
    const line = heredoc.stripTabs ? src.slice(i, stop).replace(/^\t+/, '') : src.slice(i, stop);
    i = newline < 0 ? src.length : newline + 1;
    if (line === heredoc.delimiter) return { text: lines.join('\n'), next: i };
    lines.push(line);
  }
  return { text: lines.join('\n'), next: src.length };
}
