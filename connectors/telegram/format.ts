import { Marked, type Tokens } from 'marked';

/** Telegram's limits, counted in UTF-16 code units (JavaScript string length). */
export const TEXT_LIMIT = 4096;
export const CAPTION_LIMIT = 1024;

const escape = (text: string) => text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
const escapeAttr = (text: string) => escape(text).replace(/"/g, '&quot;');

/** Deeper nesting (`> > > …`, `- - - …` on one line) is flattened: marked recurses once per level. */
export const MAX_NESTING = 8;

/**
 * Markdown → the HTML subset Telegram accepts (b, i, s, u, code, pre, a, blockquote). Headings become bold
 * lines, lists become bullet lines, images become links; anything else is reduced to its text.
 */
const marked = new Marked({
  gfm: true,
  breaks: false,
  renderer: {
    heading({ tokens }) {
      return `<b>${this.parser.parseInline(tokens)}</b>\n\n`;
    },
    paragraph({ tokens }) {
      return `${this.parser.parseInline(tokens)}\n\n`;
    },
    strong({ tokens }) {
      return `<b>${this.parser.parseInline(tokens)}</b>`;
    },
    em({ tokens }) {
      return `<i>${this.parser.parseInline(tokens)}</i>`;
    },
    del({ tokens }) {
      return `<s>${this.parser.parseInline(tokens)}</s>`;
    },
    codespan({ text }) {
      return `<code>${escape(text)}</code>`;
    },
    code({ text, lang }) {
      const cls = lang ? ` class="language-${escapeAttr(lang.split(/\s/)[0])}"` : '';
      return `<pre><code${cls}>${escape(text)}</code></pre>\n\n`;
    },
    blockquote({ tokens }) {
      // Telegram refuses a blockquote inside another: only the outermost stays one (text is escaped, so these
      // tags can only be ours).
      const inner = this.parser.parse(tokens).trim().replace(/<\/?blockquote>/g, '');
      return `<blockquote>${inner}</blockquote>\n\n`;
    },
    list(token: Tokens.List) {
      const start = typeof token.start === 'number' ? token.start : 1;
      const lines = token.items.map((item, i) => {
        const marker = token.ordered ? `${start + i}.` : '•';
        const body = this.parser.parse(item.tokens).trim().replace(/\n\n+/g, '\n');
        return `${marker} ${body.replace(/\n/g, '\n  ')}`;
      });
      return `${lines.join('\n')}\n\n`;
    },
    link({ href, tokens }) {
      return `<a href="${escapeAttr(href)}">${this.parser.parseInline(tokens)}</a>`;
    },
    image({ href, text }) {
      return `<a href="${escapeAttr(href)}">${escape(text || href)}</a>`;
    },
    hr() {
      return '———\n\n';
    },
    br() {
      return '\n';
    },
    html({ text }) {
      return escape(text);
    },
    text(token) {
      return 'tokens' in token && token.tokens ? this.parser.parseInline(token.tokens) : escape(token.text);
    },
    checkbox({ checked }) {
      return checked ? '☑ ' : '☐ ';
    },
    table(token: Tokens.Table) {
      const row = (cells: Tokens.TableCell[]) => cells.map((c) => this.parser.parseInline(c.tokens)).join(' | ');
      return `<pre>${[row(token.header), ...token.rows.map(row)].join('\n')}</pre>\n\n`;
    },
  },
});

export function markdownToTelegramHtml(markdown: string): string {
  return (marked.parse(boundNesting(markdown), { async: false }) as string).trim();
}

/** One quote or list marker at the start of what is left of a line. */
const CONTAINER_MARKER = /[ \t]*(?:>|[-*+](?=[ \t])|\d{1,9}[.)](?=[ \t]))/y;
const FENCE = /^ {0,3}(```|~~~)/;

/**
 * Lines that open more than `max` quotes or lists at once keep the first `max` markers, so the parser's recursion
 * stays shallow whatever the model writes. The text of the line is kept; code blocks are left alone.
 */
export function boundNesting(markdown: string, max = MAX_NESTING): string {
  let inFence = false;
  return markdown
    .split('\n')
    .map((line) => {
      if (FENCE.test(line)) inFence = !inFence;
      if (inFence) return line;
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

/**
 * Splits text into pieces of at most `limit` characters: at paragraph breaks, then line breaks, then spaces,
 * then anywhere. Nothing is dropped, and code fences are closed and reopened across a split.
 */
export function splitText(text: string, limit: number): string[] {
  const pieces: string[] = [];
  let rest = text.trim();
  while (rest.length > limit) {
    const window = rest.slice(0, limit);
    let cut = window.lastIndexOf('\n\n');
    if (cut < limit * 0.3) cut = window.lastIndexOf('\n');
    if (cut < limit * 0.3) cut = window.lastIndexOf(' ');
    if (cut < limit * 0.3) cut = limit;
    // Never split a surrogate pair.
    if (cut < rest.length && /[\uD800-\uDBFF]/.test(rest[cut - 1])) cut--;
    let piece = rest.slice(0, cut).trimEnd();
    rest = rest.slice(cut).trimStart();
    const fences = piece.match(/^```/gm)?.length ?? 0;
    if (fences % 2 === 1) {
      const lang = /^```(\S*)/m.exec(piece.slice(piece.lastIndexOf('```')))?.[1] ?? '';
      piece += '\n```';
      // Only the fence's closing line left: the piece just closed it.
      rest = /^```[ \t]*(\n|$)/.test(rest) ? rest.replace(/^```[ \t]*\n?/, '').trimStart() : `\`\`\`${lang}\n${rest}`;
    }
    pieces.push(piece);
  }
  if (rest) pieces.push(rest);
  return pieces;
}

export interface FormattedPart {
  html: string;
  /** The same part as plain text, sent when Telegram rejects the HTML. */
  plain: string;
}

/** Markdown → message parts that each fit Telegram's limit once converted to HTML. */
export function formatForTelegram(markdown: string, limit = TEXT_LIMIT): FormattedPart[] {
  const parts: FormattedPart[] = [];
  const queue = splitText(boundNesting(markdown), limit);
  while (queue.length) {
    const source = queue.shift()!;
    let html: string;
    try {
      html = markdownToTelegramHtml(source);
    } catch {
      // The parser gave up on this text (too deep, say): it goes out as it was written.
      parts.push({ html: escape(source), plain: source });
      continue;
    }
    if (html.length > limit && source.length > 1) {
      // Markup made it longer than the limit: split the source smaller and try again.
      queue.unshift(...splitText(source, Math.max(1, Math.floor(source.length / 2) + 1)));
      continue;
    }
    // Markup with no text in it (an empty quote) would be refused as an empty message.
    parts.push({ html: html.replace(/<[^>]*>/g, '').trim() ? html : escape(source), plain: source });
  }
  return parts;
}
