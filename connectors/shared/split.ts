// Text handling every connector shares: splitting a message under a platform's limit (at paragraphs, then lines,
// then anywhere, with code fences kept balanced as CommonMark reads them and surrogate pairs never split, measured
// in UTF-16 code units, the unit Telegram and Discord count in), and bounding Markdown nesting before parsing.

/** Deeper nesting (`> > > …`, `- - - …` on one line) is flattened: marked recurses once per level. */
export const MAX_NESTING = 8;

/** One quote or list marker at the start of what is left of a line. */
const CONTAINER_MARKER = /[ \t]*(?:>|[-*+](?=[ \t])|\d{1,9}[.)](?=[ \t]))/y;

/**
 * Lines that open more than `max` quotes or lists at once keep the first `max` markers, so the parser's recursion
 * stays shallow whatever the model writes. The text of the line is kept; code blocks are left alone.
 */
export function boundNesting(markdown: string, max = MAX_NESTING): string {
  const lines = markdown.split('\n');
  const roles = scanLines(markdown);
  return lines
    .map((line, i) => {
      if (roles[i].role !== 'text') return line;
      let depth = 0;
      let kept = 0;
      let end = 0;
      CONTAINER_MARKER.lastIndex = 0;
      while (CONTAINER_MARKER.exec(line)) {
        end = CONTAINER_MARKER.lastIndex;
        if (++depth === max) kept = end;
      }
      if (depth <= max) return line;
      return `${line.slice(0, kept)} ${line.slice(end).trimStart()}`;
    })
    .join('\n');
}

/** A fenced code block's opening line, read as CommonMark reads it. */
interface Fence {
  /** The opening line as written (indentation, run, info string): a part that goes on with the block repeats it. */
  line: string;
  indent: number;
  char: string;
  length: number;
}

const OPENING_FENCE = /^( {0,3})(`{3,}|~{3,})([^\n]*)$/;
// Only spaces may follow a closing fence: so marked reads it (CommonMark allows tabs too).
const CLOSING_FENCE = /^ {0,3}(`{3,}|~{3,}) *$/;

/** A run of 3 or more backticks or tildes; a backtick fence's info string holds no backtick. */
function openingFence(line: string): Fence | undefined {
  const match = OPENING_FENCE.exec(line);
  if (!match || (match[2][0] === '`' && match[3].includes('`'))) return undefined;
  return { line, indent: match[1].length, char: match[2][0], length: match[2].length };
}

/** Only a run of the same character, at least as long, alone on its line, closes a fence. */
function closesFence(line: string, fence: Fence): boolean {
  const match = CLOSING_FENCE.exec(line);
  return match !== null && match[1][0] === fence.char && match[1].length >= fence.length;
}

const closingLine = (fence: Fence) => ' '.repeat(fence.indent) + fence.char.repeat(fence.length);

interface Line {
  start: number;
  /** Where the line ends, before its newline. */
  end: number;
  role: 'text' | 'open' | 'content' | 'close';
  fence?: Fence;
}

/** The lines of `text` with their part in fenced code blocks; with `until`, up to the first line starting after it. */
function scanLines(text: string, until = Infinity): Line[] {
  const lines: Line[] = [];
  let fence: Fence | undefined;
  for (let start = 0; start <= text.length; ) {
    const newline = text.indexOf('\n', start);
    const end = newline < 0 ? text.length : newline;
    const line = text.slice(start, end);
    if (fence) {
      lines.push({ start, end, role: closesFence(line, fence) ? 'close' : 'content', fence });
      if (lines[lines.length - 1].role === 'close') fence = undefined;
    } else {
      fence = openingFence(line);
      lines.push({ start, end, role: fence ? 'open' : 'text', fence });
    }
    if (start > until || newline < 0) break;
    start = end + 1;
  }
  return lines;
}

/** The content of each fenced code block, with the indentation of its fence taken off as the parser does. */
export function codeBlocks(text: string): { fence: Fence; content: string }[] {
  const blocks: { fence: Fence; content: string[] }[] = [];
  for (const line of scanLines(text)) {
    if (line.role === 'open') blocks.push({ fence: line.fence!, content: [] });
    if (line.role === 'content') {
      const indent = new RegExp(`^ {0,${line.fence!.indent}}`);
      blocks[blocks.length - 1].content.push(text.slice(line.start, line.end).replace(indent, ''));
    }
  }
  return blocks.map((block) => ({ fence: block.fence, content: block.content.join('\n') }));
}

export const dropBlankLines = (text: string) => text.replace(/^(?:[ \t]*\n)+/, '');

/**
 * Splits text into pieces of at most `limit` characters: at paragraph breaks, then line breaks, then spaces,
 * then anywhere. Nothing is dropped, and a code block split across pieces is closed and reopened with its own fence.
 */
export function splitText(text: string, limit: number): string[] {
  let rest = dropBlankLines(text.replace(/\r\n?/g, '\n')).trimEnd();
  const pieces: string[] = [];
  while (rest.length > limit) {
    const cut = cutOnce(rest, limit);
    // A block whose fences are too long to repeat: cut by length alone.
    if (!cut) return [...pieces, ...cutToFit(rest, limit, () => 1)];
    pieces.push(cut.piece);
    rest = cut.rest;
  }
  if (rest.trim()) pieces.push(rest);
  return pieces;
}

/**
 * The first piece of `rest` and what follows it, cut as late as it can be at the best kind of place within the
 * first 30%–100% of `limit`. Never inside a fence's opening or closing line; inside a code block, the piece closes
 * the block and what follows reopens it, so every line of code stays code.
 */
export function cutOnce(rest: string, limit: number): { piece: string; rest: string } | undefined {
  const lines = scanLines(rest, limit + 1);
  const enough = limit * 0.3;

  const cutAt = (at: number, index: number) => {
    const line = lines[index];
    const inCode = line.role === 'content' || (line.role === 'open' && at === line.end);
    if (!inCode) {
      const piece = rest.slice(0, at).trimEnd();
      if (!piece || piece.length > limit) return undefined;
      return { piece, rest: dropBlankLines(at === line.end ? rest.slice(at + 1) : rest.slice(at).replace(/^[ \t]+/, '')) };
    }
    const fence = line.fence!;
    // A piece holding only the fence's opening line would show an empty block; fences so long that repeating them
    // would take half of every piece are not repeated (the caller sends the rest as written).
    if (line.role === 'open' || 2 * (fence.line.length + fence.indent + fence.length + 2) > limit) return undefined;
    const piece = `${rest.slice(0, at)}\n${closingLine(fence)}`;
    if (piece.length > limit) return undefined;
    const following = lines[index + 1];
    // The block ends on the next line: this piece closes it already.
    if (at === line.end && following?.role === 'close') return { piece, rest: dropBlankLines(rest.slice(following.end + 1)) };
    return { piece, rest: `${fence.line}\n${rest.slice(at === line.end ? at + 1 : at)}` };
  };

  const splittable = (line: Line) => line.role === 'text' || line.role === 'content';
  /** The last place within a line where a cut leaves the piece within the limit. */
  const lastInLine = (line: Line) => Math.min(line.end - 1, line.role === 'content' ? limit - 1 - closingLine(line.fence!).length : limit);
  const beforeBlank = (i: number) => i + 1 < lines.length && /^[ \t]*$/.test(rest.slice(lines[i + 1].start, lines[i + 1].end));
  const attempts: ((line: Line, index: number) => ReturnType<typeof cutAt>)[] = [
    // A line break before a blank line, then any line break, then after a space.
    (line, i) => (line.end >= enough && beforeBlank(i) ? cutAt(line.end, i) : undefined),
    (line, i) => (line.end >= enough && i < lines.length - 1 ? cutAt(line.end, i) : undefined),
    (line, i) => {
      if (!splittable(line)) return undefined;
      const space = rest.lastIndexOf(' ', lastInLine(line) - 1);
      return space >= line.start && space + 1 >= enough ? cutAt(space + 1, i) : undefined;
    },
    // Anywhere but inside a surrogate pair.
    (line, i) => {
      const atEnd = i < lines.length - 1 ? cutAt(line.end, i) : undefined;
      if (atEnd || !splittable(line)) return atEnd;
      let at = lastInLine(line);
      if (/[\uD800-\uDBFF]/.test(rest[at - 1] ?? '')) at--;
      return at > line.start ? cutAt(at, i) : undefined;
    },
  ];
  for (const attempt of attempts) {
    for (let i = lines.length - 1; i >= 0; i--) {
      const cut = lines[i].start <= limit ? attempt(lines[i], i) : undefined;
      if (cut) return cut;
    }
  }
  return undefined;
}


/** Text cut into pieces of at most `limit` as measured: at line breaks where it can, never in a surrogate pair. */
export function cutToFit(text: string, limit: number, measure: (char: string) => number): string[] {
  const pieces: string[] = [];
  let rest = text;
  for (;;) {
    let at = 0;
    for (let size = 0; at < rest.length && size + measure(rest[at]) <= limit; at++) size += measure(rest[at]);
    if (at === rest.length) break;
    if (at > 1 && /[\uD800-\uDBFF]/.test(rest[at - 1])) at--;
    at = Math.max(at, 1);
    const newline = rest.lastIndexOf('\n', at - 1);
    const cut = newline >= at * 0.3 ? newline : at;
    pieces.push(rest.slice(0, cut));
    rest = rest.slice(cut === newline ? cut + 1 : cut);
  }
  pieces.push(rest);
  return pieces.filter((piece) => piece.trim());
}
