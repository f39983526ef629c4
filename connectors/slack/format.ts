// The model writes Markdown; Slack shows mrkdwn (`*bold*`, `_italic_`, `~strike~`, `<url|label>`, with `& < >`
// escaped and its own `<@U…>`, `<#C…>`, `<!here>` tokens kept). Converted through marked's parser, never by regexes
// over the Markdown, and split under Slack's limits with the shared splitter.
import { Marked, type Tokens } from 'marked';
import { boundNesting, cutOnce, cutToFit, dropBlankLines } from '../shared/split.ts';

/** Slack takes 40,000 characters of `text` but truncates long messages; 4,000 is its advice. */
export const TEXT_LIMIT = 4000;
/** A section block's text. */
export const SECTION_LIMIT = 3000;

/** Slack's own tokens in text: user, channel and group mentions, `<!here>`, `<!date…>`: kept as written. */
const SLACK_TOKEN = /(<(?:@[UW][A-Z0-9]+(?:\|[^<>]*)?|#[CG][A-Z0-9]+(?:\|[^<>]*)?|!(?:here|channel|everyone)(?:\|[^<>]*)?|!subteam\^[A-Z0-9]+(?:\|[^<>]*)?|!date\^[^<>]*)>)/;

const escapeBare = (text: string) => text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

/** Escapes what mrkdwn treats as control characters, keeping Slack's mention tokens. */
export function escapeMrkdwn(text: string): string {
  return text
    .split(SLACK_TOKEN)
    .map((part, i) => (i % 2 ? part : escapeBare(part)))
    .join('');
}

/** A link label may not hold `|` or `>` (they end it). */
const linkLabel = (label: string) => label.replace(/[|>]/g, (c) => (c === '|' ? '¦' : '&gt;'));
const linkTarget = (href: string) => href.replace(/[<>|\s]/g, encodeURIComponent);

const marked = new Marked({
  gfm: true,
  breaks: false,
  renderer: {
    heading({ tokens }) {
      return `*${this.parser.parseInline(tokens)}*\n\n`;
    },
    paragraph({ tokens }) {
      return `${this.parser.parseInline(tokens)}\n\n`;
    },
    strong({ tokens }) {
      return `*${this.parser.parseInline(tokens)}*`;
    },
    em({ tokens }) {
      return `_${this.parser.parseInline(tokens)}_`;
    },
    del({ tokens }) {
      return `~${this.parser.parseInline(tokens)}~`;
    },
    codespan({ text }) {
      return `\`${escapeBare(text)}\``;
    },
    code({ text }) {
      // mrkdwn has no language on a block; the code is shown as written.
      return `\`\`\`\n${escapeBare(text)}\n\`\`\`\n\n`;
    },
    blockquote({ tokens }) {
      const inner = this.parser.parse(tokens).trim();
      return `${inner
        .split('\n')
        .map((line) => `> ${line.replace(/^(?:> )+/, '')}`)
        .join('\n')}\n\n`;
    },
    list(token: Tokens.List) {
      const start = typeof token.start === 'number' ? token.start : 1;
      const lines = token.items.map((item, i) => {
        const marker = token.ordered ? `${start + i}.` : '•';
        // Each block of the item on its own line (a tight item's text runs straight into a nested list otherwise).
        const blocks = item.tokens.filter((token) => token.type !== 'checkbox').map((token) => this.parser.parse([token]).trim());
        const box = item.task ? (item.checked ? '☑ ' : '☐ ') : '';
        const body = (box + blocks.filter(Boolean).join('\n'))
          .split(/(```[\s\S]*?```)/)
          .map((text, j) => (j % 2 ? text : text.replace(/\n\n+/g, '\n').replace(/\n/g, '\n    ')))
          .join('');
        return `${marker} ${body}`;
      });
      return `${lines.join('\n')}\n\n`;
    },
    link({ href, tokens }) {
      const label = this.parser.parseInline(tokens);
      if (!/^(https?|mailto):/i.test(href)) return label;
      return label === escapeBare(href) ? `<${linkTarget(href)}>` : `<${linkTarget(href)}|${linkLabel(label)}>`;
    },
    image({ href, text }) {
      return /^https?:/i.test(href) ? `<${linkTarget(href)}|${linkLabel(escapeBare(text || href))}>` : escapeBare(text);
    },
    hr() {
      return '———\n\n';
    },
    br() {
      return '\n';
    },
    html({ text }) {
      return escapeMrkdwn(text);
    },
    text(token) {
      return 'tokens' in token && token.tokens ? this.parser.parseInline(token.tokens) : escapeMrkdwn(token.text);
    },
    checkbox({ checked }) {
      return checked ? '☑ ' : '☐ ';
    },
    table(token: Tokens.Table) {
      // mrkdwn has no tables: the rows as lines of a code block, cells apart, readable in any width.
      const plain = (cells: Tokens.TableCell[]) => cells.map((c) => c.text.trim());
      const rows = [plain(token.header), ...token.rows.map(plain)];
      const widths = rows[0].map((_, col) => Math.max(...rows.map((r) => (r[col] ?? '').length)));
      const line = (cells: string[]) => cells.map((c, col) => c.padEnd(widths[col])).join(' | ').trimEnd();
      return `\`\`\`\n${escapeBare([line(rows[0]), widths.map((w) => '-'.repeat(w)).join('-|-'), ...rows.slice(1).map(line)].join('\n'))}\n\`\`\`\n\n`;
    },
  },
});

/** Markdown → mrkdwn. Throws when the parser gives up (nesting it cannot follow). */
export function markdownToMrkdwn(markdown: string): string {
  return (marked.parse(boundNesting(markdown), { async: false }) as string).trim();
}

export interface FormattedPart {
  mrkdwn: string;
  /** The Markdown it was converted from. */
  source: string;
  /** Whether it went out converted (false: the piece as written, escaped, when the parser gave up on it). */
  converted: boolean;
}

const escapedLength = (char: string) => (char === '&' ? 5 : char === '<' || char === '>' ? 4 : 1);

/**
 * Markdown → mrkdwn parts that each fit `limit` once converted: the Markdown is cut first (paragraphs, lines,
 * code fences kept balanced) and each piece converted, cut smaller while its mrkdwn is too long.
 */
export function formatForSlack(markdown: string, limit = TEXT_LIMIT): FormattedPart[] {
  let rest = dropBlankLines(boundNesting(markdown.replace(/\r\n?/g, '\n'))).trimEnd();
  const parts: FormattedPart[] = [];
  while (rest.trim()) {
    for (let budget = limit; ; ) {
      const cut = rest.length <= budget ? { piece: rest, rest: '' } : budget >= 1 ? cutOnce(rest, budget) : undefined;
      if (!cut) {
        parts.push(...asWritten(rest, limit));
        rest = '';
        break;
      }
      let converted: string | undefined;
      try {
        converted = markdownToMrkdwn(cut.piece);
      } catch {
        converted = undefined;
      }
      if (converted !== undefined && converted.length > limit) {
        budget = Math.min(budget - 1, Math.floor((cut.piece.length * limit) / converted.length));
        continue;
      }
      if (converted === undefined || !converted.trim()) parts.push(...asWritten(cut.piece, limit));
      else parts.push({ mrkdwn: converted, source: cut.piece, converted: true });
      rest = cut.rest;
      break;
    }
  }
  return parts;
}

const asWritten = (text: string, limit: number): FormattedPart[] =>
  cutToFit(text, limit, escapedLength).map((piece) => ({ mrkdwn: escapeMrkdwn(piece), source: piece, converted: false }));

/** What a person types, as the model should read it: entities decoded, links as their label and URL. */
export function mrkdwnToPlain(text: string): string {
  return text
    .replace(/<((?:https?|mailto):[^<>|]+)\|([^<>]+)>/g, (_, url: string, label: string) => (label === url ? url : `${label} (${url})`))
    .replace(/<((?:https?|mailto):[^<>|]+)>/g, '$1')
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&amp;/g, '&');
}
