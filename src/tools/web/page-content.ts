export type ContentKind = 'html' | 'json' | 'text';

const TEXT_TYPES = new Set([
  'application/xml', 'application/yaml', 'application/x-yaml', 'application/toml', 'application/javascript',
  'application/ecmascript', 'application/x-sh', 'application/x-ndjson', 'application/sql', 'application/csv',
]);

/** How a Content-Type is read, or undefined for what is not read (images, PDF, archives...); '' is sniffed. */
export function contentKind(contentType: string): ContentKind | 'sniff' | undefined {
  if (!contentType) return 'sniff';
  if (contentType === 'text/html' || contentType === 'application/xhtml+xml') return 'html';
  if (contentType === 'application/json' || contentType.endsWith('+json')) return 'json';
  if (contentType.startsWith('text/') || contentType.endsWith('+xml') || TEXT_TYPES.has(contentType)) return 'text';
  return undefined;
}

/** A body without a Content-Type: HTML by its tags, text when it has no NUL bytes, else not read. */
function sniff(body: Buffer): ContentKind | undefined {
  const head = body.subarray(0, 1024);
  if (head.includes(0)) return undefined;
  const start = head.toString('latin1').replace(/^\uFEFF?\s*/, '').slice(0, 512).toLowerCase();
  if (/^<!doctype html|^<html|<head[\s>]|<body[\s>]/.test(start)) return 'html';
  return 'text';
}

/** Decodes a body by its BOM, else the charset the header or (for HTML) a meta tag names, else UTF-8. */
export function decodeText(body: Buffer, contentTypeHeader: string | undefined, kind: ContentKind): string {
  const declared =
    /charset\s*=\s*"?([\w.:-]+)/i.exec(contentTypeHeader ?? '')?.[1] ??
    (kind === 'html' ? /<meta[^>]+charset\s*=\s*["']?([\w.:-]+)/i.exec(body.subarray(0, 4096).toString('latin1'))?.[1] : undefined);
  const bom = body[0] === 0xef && body[1] === 0xbb && body[2] === 0xbf ? 'utf-8' : body[0] === 0xff && body[1] === 0xfe ? 'utf-16le' : body[0] === 0xfe && body[1] === 0xff ? 'utf-16be' : undefined;
  let decoder: InstanceType<typeof TextDecoder>;
  try {
    decoder = new TextDecoder(bom ?? declared ?? 'utf-8');
  } catch {
    decoder = new TextDecoder('utf-8');
  }
  return decoder.decode(body);
}

export interface PageText {
  kind: ContentKind;
  title?: string;
  text: string;
}

/**
 * The readable text of a body: HTML as Markdown, JSON pretty-printed, text as it is; undefined when not readable.
 * The HTML converter (cheerio, turndown and what they bring) loads with the first page, not with every parlor command.
 */
export async function pageText(body: Buffer, contentType: string, contentTypeHeader: string | undefined, url: string): Promise<PageText | undefined> {
  const declared = contentKind(contentType);
  const kind = declared === 'sniff' ? sniff(body) : declared;
  if (!kind) return undefined;
  const text = decodeText(body, contentTypeHeader, kind);
  if (kind === 'html') {
    const { htmlToMarkdown } = await import('./html-to-markdown.ts');
    const { title, markdown } = htmlToMarkdown(text, url);
    return { kind, title, text: markdown };
  }
  if (kind === 'json') {
    try {
      return { kind, text: JSON.stringify(JSON.parse(text), null, 2) };
    } catch {
      // Cut at the size cap, or not JSON after all: shown as it came.
      return { kind, text };
    }
  }
  return { kind, text: text.replace(/^\uFEFF/, '') };
}

/** Splits text into pages of at most `size` characters, at a blank line, a line or a space where one is near. */
export function splitPages(text: string, size: number): string[] {
  const pages: string[] = [];
  let rest = text;
  while (rest.length > size) {
    const window = rest.slice(0, size);
    let cut = window.lastIndexOf('\n\n');
    if (cut < size / 2) cut = window.lastIndexOf('\n');
    if (cut < size / 2) cut = window.lastIndexOf(' ');
    if (cut < size / 2) cut = size;
    pages.push(rest.slice(0, cut).trimEnd());
    // The separator cut at goes with neither page; the next page's own indentation stays.
    rest = rest.slice(cut).replace(/^(\n+| )/, '');
  }
  if (rest.length || pages.length === 0) pages.push(rest);
  return pages;
}
