import { Marked, type Tokens } from 'marked';
import { boundNesting, codeBlocks, cutOnce, cutToFit, dropBlankLines } from '../shared/split.ts';

export { boundNesting, MAX_NESTING, splitText } from '../shared/split.ts';

/** Telegram's limits, counted in UTF-16 code units (JavaScript string length). */
export const TEXT_LIMIT = 4096;
export const CAPTION_LIMIT = 1024;

const escape = (text: string) => text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
const escapeAttr = (text: string) => escape(text).replace(/"/g, '&quot;');


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
        // Lines are indented under the marker, but code keeps its lines as written.
        const body = this.parser
          .parse(item.tokens)
          .trim()
          .split(/(<pre>[\s\S]*?<\/pre>)/)
          .map((text, i) => (i % 2 ? text : text.replace(/\n\n+/g, '\n').replace(/\n/g, '\n  ')))
          .join('');
        return `${marker} ${body}`;
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

const escapedLength = (char: string) => (char === '&' ? 5 : char === '<' || char === '>' ? 4 : 1);

export interface FormattedPart {
  html: string;
  /** The same part as plain text, sent when Telegram rejects the HTML. */
  plain: string;
}

const PRE_CODE = /<pre><code(?: class="[^"]*")?>([\s\S]*?)<\/code><\/pre>/g;
const unescape = (html: string) => html.replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&quot;/g, '"').replace(/&amp;/g, '&');

/**
 * Whether every code block of `source` comes out as code, character for character, in `html`. A block the parser
 * reads differently from the fences here (an HTML block around it, say) fails; so the part goes out as written.
 * Blocks whose fence is indented are left out: in a list item, the list's indentation is added to their lines.
 */
function showsCodeAsWritten(source: string, html: string): boolean {
  const shown = [...html.matchAll(PRE_CODE)].map((match) => unescape(match[1]));
  let next = 0;
  for (const block of codeBlocks(source)) {
    if (block.fence.indent > 0) continue;
    next = shown.indexOf(block.content, next) + 1;
    if (next === 0) return false;
  }
  return true;
}

const asWritten = (text: string, limit: number): FormattedPart[] => cutToFit(text, limit, escapedLength).map((piece) => ({ html: escape(piece), plain: piece }));

/** The HTML of a piece, or undefined when the parser gives up on it (too deep, say). */
function render(source: string): string | undefined {
  try {
    return markdownToTelegramHtml(source);
  } catch {
    return undefined;
  }
}

/**
 * Markdown → message parts that each fit Telegram's limit once converted to HTML. Code is shown exactly as written:
 * a part whose code blocks would not come out as they are (or that the parser gives up on, or that would be empty)
 * goes out as its text, escaped, Markdown and all.
 */
export function formatForTelegram(markdown: string, limit = TEXT_LIMIT): FormattedPart[] {
  let rest = dropBlankLines(boundNesting(markdown.replace(/\r\n?/g, '\n'))).trimEnd();
  const parts: FormattedPart[] = [];
  while (rest.trim()) {
    // Markup makes a piece longer: the piece is cut smaller, in proportion, until its HTML fits.
    for (let budget = limit; ; ) {
      const cut = rest.length <= budget ? { piece: rest, rest: '' } : budget >= 1 ? cutOnce(rest, budget) : undefined;
      if (!cut) {
        parts.push(...asWritten(rest, limit));
        rest = '';
        break;
      }
      const html = render(cut.piece);
      if (html !== undefined && html.length > limit) {
        budget = Math.min(budget - 1, Math.floor((cut.piece.length * limit) / html.length));
        continue;
      }
      if (html === undefined || !html.replace(/<[^>]*>/g, '').trim() || !showsCodeAsWritten(cut.piece, html)) parts.push(...asWritten(cut.piece, limit));
      else parts.push({ html, plain: cut.piece });
      rest = cut.rest;
      break;
    }
  }
  return parts;
}
