import * as cheerio from 'cheerio';
import type { Cheerio, CheerioAPI } from 'cheerio';
import TurndownService from 'turndown';
import { gfm } from 'turndown-plugin-gfm';
import { normalizeTables, tableRules } from './markdown-tables.ts';

// What a reader never sees as the page's text: code, styling, embedded apps, forms, the site's chrome.
const NOISE = [
  'script', 'style', 'noscript', 'template', 'iframe', 'frame', 'frameset', 'object', 'embed', 'svg', 'canvas',
  'form', 'button', 'input', 'select', 'textarea', 'dialog', 'link', 'meta',
  'nav', 'footer', 'aside', '[role=navigation]', '[role=contentinfo]', '[role=complementary]', '[role=search]',
  '[hidden]', '[aria-hidden=true]',
].join(',');

/** The page's title and its readable part as Markdown, links made absolute against `pageUrl`. */
export function htmlToMarkdown(html: string, pageUrl: string): { title?: string; markdown: string } {
  const $ = cheerio.load(html);
  const title = collapse($('title').first().text()) || collapse($('meta[property="og:title"]').attr('content') ?? '') || collapse($('h1').first().text());
  const base = baseUrl($, pageUrl);

  // Comments are read by no one but a model, and would come through wherever HTML did.
  $.root().find('*').addBack().contents().filter((_, node) => node.type === 'comment').remove();
  $(NOISE).remove();
  // Text hidden by inline CSS is read by no one but a model: a classic place for planted instructions.
  $('[style]').filter((_, el) => /display\s*:\s*none|visibility\s*:\s*hidden/i.test($(el).attr('style') ?? '')).remove();
  // The site's banner goes; an article's own header (its title, byline) stays.
  $('header, [role=banner]').filter((_, el) => $(el).parents('article, main, [role=main]').length === 0).remove();

  const root = contentRoot($);
  absolutize($, root, base);
  normalizeCode($, root);
  normalizeTables($, root);

  const markdown = converter()
    .turndown($.html(root))
    .replace(/[ \t]+$/gm, '')
    .replace(/\n{3,}/g, '\n\n')
    .trim();
  return { title: title || undefined, markdown };
}

/** `main`, else the largest `article`, else `[role=main]`, else the body. */
function contentRoot($: CheerioAPI): Cheerio<any> {
  const main = $('main').first();
  if (main.length) return main;
  const articles = $('article').toArray();
  if (articles.length) return $(articles.reduce((best, el) => ($(el).text().length > $(best).text().length ? el : best)));
  const roleMain = $('[role=main]').first();
  if (roleMain.length) return roleMain;
  const body = $('body');
  return body.length ? body : $.root();
}

function baseUrl($: CheerioAPI, pageUrl: string): string {
  const href = $('base[href]').first().attr('href');
  if (!href) return pageUrl;
  try {
    return new URL(href, pageUrl).href;
  } catch {
    return pageUrl;
  }
}

function absolute(ref: string, base: string): string | undefined {
  try {
    const url = new URL(ref, base);
    return url.protocol === 'http:' || url.protocol === 'https:' || url.protocol === 'mailto:' ? url.href : undefined;
  } catch {
    return undefined;
  }
}

/** Links and images point at full addresses; a `javascript:` link keeps only its text, a data: image goes. */
function absolutize($: CheerioAPI, root: Cheerio<any>, base: string): void {
  root.find('a[href]').each((_, el) => {
    const href = absolute($(el).attr('href')!, base);
    if (href) $(el).attr('href', href);
    else $(el).removeAttr('href');
  });
  root.find('img').each((_, el) => {
    const src = absolute($(el).attr('src') ?? '', base);
    if (src && $(el).attr('alt')?.trim()) $(el).attr('src', src);
    else $(el).remove();
  });
}

/** A `<pre>` without `<code>` becomes a fenced block too; a language on the `pre` moves to its code. */
function normalizeCode($: CheerioAPI, root: Cheerio<any>): void {
  root.find('pre').each((_, el) => {
    const pre = $(el);
    const language = /(?:^|\s)(?:language|lang)-([\w+#-]+)/.exec(pre.attr('class') ?? '')?.[1];
    if (pre.children('code').length === 0) pre.html(`<code>${pre.html() ?? ''}</code>`);
    const code = pre.children('code').first();
    if (language && !/language-/.test(code.attr('class') ?? '')) code.addClass(`language-${language}`);
  });
}

function converter(): TurndownService {
  const service = new TurndownService({
    headingStyle: 'atx',
    codeBlockStyle: 'fenced',
    bulletListMarker: '-',
    emDelimiter: '_',
    // Nothing reaches the model as HTML: an element a rule would keep as it is comes through as its text.
    keepReplacement: (content, node) => ((node as unknown as { isBlock: boolean }).isBlock ? `\n\n${content}\n\n` : content),
  });
  service.use(gfm);
  tableRules(service);
  service.addRule('image', {
    filter: 'img',
    replacement: (_content, node) => {
      const el = node as unknown as { getAttribute(name: string): string | null };
      const alt = collapse(el.getAttribute('alt') ?? '').replace(/[[\]]/g, '');
      const src = el.getAttribute('src') ?? '';
      return alt && src ? `![${alt}](${src})` : '';
    },
  });
  return service;
}

function collapse(text: string): string {
  return text.replace(/\s+/g, ' ').trim();
}
