// Discord's Markdown is close to the model's: most of it goes out as written. What Discord does not render is
// rewritten (tables, headings deeper than ###, images), and the text is split under 2000 characters.
import { escapeMarkdown } from 'discord.js';
import { Marked, type Token, type Tokens } from 'marked';
import { boundNesting, splitText } from '../shared/split.ts';

/**
 * Discord's limit on a message's content. Discord counts code points; the shared splitter counts UTF-16 units, of
 * which a text has at least as many, so a part it cuts always fits.
 */
export const TEXT_LIMIT = 2000;

const lexer = new Marked({ gfm: true });

/** `![alt](url "title")`, as written. */
const IMAGE = /!\[([^\]\n]*)\]\(\s*<?([^)\s>]+)>?(?:\s+(?:"[^"]*"|'[^']*'|\([^)]*\)))?\s*\)/g;
/** Inline code spans, which keep what they hold. */
const CODE_SPAN = /(`+)[\s\S]*?[^`]\1(?!`)|(`+)[^`]\2(?!`)/g;

/** Images become links (Discord shows the picture of a bare link); code spans are left alone. */
function rewriteImages(text: string): string {
  let out = '';
  let last = 0;
  for (const span of text.matchAll(CODE_SPAN)) {
    out += text.slice(last, span.index).replace(IMAGE, imageLink) + span[0];
    last = span.index + span[0].length;
  }
  return out + text.slice(last).replace(IMAGE, imageLink);
}

const imageLink = (_match: string, alt: string, url: string) => (alt.trim() ? `[${alt.trim()}](${url})` : url);

/** A table as aligned columns in a code block: Discord shows the pipes of a Markdown table as they are. */
function tableAsCode(token: Tokens.Table): string {
  const rows = [token.header.map((c) => c.text), ...token.rows.map((r) => r.map((c) => c.text))].map((row) => row.map((cell) => cell.replace(/\\\|/g, '|')));
  const widths = rows[0].map((_, i) => Math.max(...rows.map((row) => [...(row[i] ?? '')].length)));
  const line = (row: string[]) => row.map((cell, i) => cell + ' '.repeat(widths[i] - [...cell].length)).join(' | ').trimEnd();
  const rule = widths.map((w) => '-'.repeat(Math.max(1, w))).join('-+-');
  return ['```', line(rows[0]), rule, ...rows.slice(1).map(line), '```'].join('\n');
}

const trailingNewlines = (raw: string) => /\n*$/.exec(raw)![0];

function rewriteBlock(token: Token): string {
  switch (token.type) {
    case 'code':
    case 'space':
    case 'html':
      return token.raw;
    case 'table':
      return tableAsCode(token as Tokens.Table) + trailingNewlines(token.raw);
    case 'heading':
      // Discord renders #, ## and ###; deeper headings would show their hashes.
      if ((token as Tokens.Heading).depth > 3) return `**${rewriteImages((token as Tokens.Heading).text)}**${trailingNewlines(token.raw)}`;
      return rewriteImages(token.raw);
    default:
      return rewriteImages(token.raw);
  }
}

/** The model's Markdown as Discord renders it. */
export function toDiscordMarkdown(markdown: string): string {
  const text = boundNesting(markdown.replace(/\r\n?/g, '\n'));
  try {
    return lexer.lexer(text).map(rewriteBlock).join('');
  } catch {
    // The parser gave up (it should not): the text goes as written, which Discord shows as it can.
    return text;
  }
}

/** Markdown → message parts under Discord's limit. */
export function formatForDiscord(markdown: string, limit = TEXT_LIMIT): string[] {
  return splitText(toDiscordMarkdown(markdown), limit);
}

/** One part as plain text, its Markdown escaped so Discord shows it as written (sent when Discord refuses a part). */
export function plainForDiscord(part: string, limit = TEXT_LIMIT): string[] {
  return splitText(escapeMarkdown(part), limit);
}
