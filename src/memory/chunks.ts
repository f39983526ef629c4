// How a document is cut for the knowledge base: pieces of about `size` characters that end where a paragraph ends,
// each starting with the last ~`overlap` characters of the one before (so a sentence cut between two is whole in
// one of them), and a new piece at every Markdown heading.

export interface ChunkOptions {
  /** The most characters a chunk holds, its overlap included (a single word longer than this is cut). */
  size?: number;
  /** About how many characters of the previous chunk a chunk repeats at its start. */
  overlap?: number;
}

export const CHUNK_SIZE = 1200;
export const CHUNK_OVERLAP = 200;

/** A paragraph, or a part of a long one; `joiner` is what stood before it in the text (a blank line or a space). */
interface Piece {
  text: string;
  joiner: string;
}

/** The chunks of `text`, in order; none for a text of whitespace. */
export function chunkText(text: string, options: ChunkOptions = {}): string[] {
  const size = options.size ?? CHUNK_SIZE;
  const overlap = Math.min(options.overlap ?? CHUNK_OVERLAP, Math.floor(size / 2));
  const chunks: string[] = [];
  for (const section of sections(text)) {
    const pieces = section.flatMap((paragraph) => splitLong(paragraph, size - overlap));
    let current: Piece[] = [];
    // Whether `current` holds anything beyond the overlap it started with.
    let fresh = false;
    for (const piece of pieces) {
      if (fresh && length(current) + piece.joiner.length + piece.text.length > size) {
        chunks.push(render(current));
        current = tail(current, overlap);
        fresh = false;
        while (current.length && length(current) + piece.joiner.length + piece.text.length > size) current.shift();
      }
      current.push(current.length ? piece : { ...piece, joiner: '' });
      fresh = true;
    }
    if (fresh) chunks.push(render(current));
  }
  return chunks;
}

const render = (pieces: readonly Piece[]) => pieces.map((p, i) => (i ? p.joiner : '') + p.text).join('');
const length = (pieces: readonly Piece[]) => render(pieces).length;

const HEADING = /^ {0,3}#{1,6}(\s|$)/;
const FENCE = /^ {0,3}(```|~~~)/;

/**
 * The text's sections (each opened by a Markdown heading, outside code fences), as their paragraphs. A heading
 * with nothing under it before the next stays with the next section.
 */
function sections(text: string): string[][] {
  const lines = text.replace(/\r\n?/g, '\n').split('\n').map((line) => line.trimEnd());
  const result: string[][] = [];
  let paragraphs: string[] = [];
  let paragraph: string[] = [];
  let inFence = false;
  let onlyHeadings = true;
  const endParagraph = () => {
    if (paragraph.length) paragraphs.push(paragraph.join('\n'));
    paragraph = [];
  };
  for (const line of lines) {
    if (FENCE.test(line)) inFence = !inFence;
    if (!inFence && HEADING.test(line)) {
      endParagraph();
      if (paragraphs.length && !onlyHeadings) {
        result.push(paragraphs);
        paragraphs = [];
      }
      paragraphs.push(line.trim());
      onlyHeadings = true;
      continue;
    }
    if (line.trim() === '' && !inFence) {
      endParagraph();
      continue;
    }
    paragraph.push(line);
    onlyHeadings = false;
  }
  endParagraph();
  if (paragraphs.length) result.push(paragraphs);
  return result;
}

/** A paragraph as pieces of at most `max` characters: whole sentences where they fit, else whole words. */
function splitLong(paragraph: string, max: number): Piece[] {
  if (paragraph.length <= max) return [{ text: paragraph, joiner: '\n\n' }];
  const sentences = paragraph.split(/(?<=[.!?…])\s+/);
  const units = sentences.flatMap((s) => (s.length <= max ? [s] : s.split(/\s+/).flatMap((w) => cutWord(w, max))));
  const pieces: Piece[] = [];
  let text = '';
  for (const unit of units) {
    if (text && text.length + 1 + unit.length > max) {
      pieces.push({ text, joiner: pieces.length ? ' ' : '\n\n' });
      text = '';
    }
    text = text ? `${text} ${unit}` : unit;
  }
  if (text) pieces.push({ text, joiner: pieces.length ? ' ' : '\n\n' });
  return pieces;
}

function cutWord(word: string, max: number): string[] {
  const parts: string[] = [];
  for (let i = 0; i < word.length; i += max) parts.push(word.slice(i, i + max));
  return parts;
}

/** The end of a chunk to repeat at the start of the next: whole pieces when they fit in `overlap`, else whole words. */
function tail(pieces: readonly Piece[], overlap: number): Piece[] {
  const kept: Piece[] = [];
  let used = 0;
  for (let i = pieces.length - 1; i >= 0; i--) {
    const piece = pieces[i];
    if (used + piece.text.length + (kept.length ? kept[0].joiner.length : 0) > overlap) {
      if (kept.length) break;
      // The last piece alone is longer than the overlap: its last words.
      const words = piece.text.split(/(\s+)/);
      let suffix = '';
      for (let w = words.length - 1; w >= 0; w--) {
        if ((words[w] + suffix).length > overlap) break;
        suffix = words[w] + suffix;
      }
      suffix = suffix.trimStart();
      return suffix ? [{ text: suffix, joiner: piece.joiner }] : [];
    }
    kept.unshift(piece);
    used += piece.text.length + piece.joiner.length;
  }
  return kept;
}
