import type { Cheerio, CheerioAPI } from 'cheerio';
import type TurndownService from 'turndown';

// A page could ask for a million columns; more than this is not a table anyone reads.
const MAX_SPAN = 50;

interface Cell {
  html: string;
  align: string;
}

const emptyCell = (): Cell => ({ html: '', align: '' });

/**
 * Rebuilds every table as the one shape the gfm plugin turns into Markdown: a heading row of `th` in a `thead`,
 * then the other rows, every row as wide as the widest. Any other shape (no heading row, an empty `thead`) the
 * plugin keeps as raw HTML, attributes and all. A table inside a cell becomes a line of text in that cell.
 */
export function normalizeTables($: CheerioAPI, root: Cheerio<any>): void {
  // Innermost first, so a nested table is text before the table around it is rebuilt.
  for (const el of root.find('table').toArray().reverse()) {
    const table = $(el);
    const rows = gridOf($, ownRows($, el)).filter((cells) => cells.length > 0);
    const caption = table.children('caption').first().html()?.trim();
    if (table.parents('table').length) {
      const text = rows.map((cells) => cells.map((c) => c.html).filter((html) => html.trim()).join(', ')).filter(Boolean).join('; ');
      table.replaceWith(`<span>${[caption, text].filter(Boolean).join(': ')}</span>`);
      continue;
    }
    if (rows.length === 0) {
      table.replaceWith(caption ? `<p>${caption}</p>` : '');
      continue;
    }
    const width = Math.max(...rows.map((cells) => cells.length));
    const [head, ...body] = rows.map((cells) => [...cells, ...Array.from({ length: width - cells.length }, emptyCell)]);
    const heading = head.map((c) => `<th${c.align ? ` align="${c.align}"` : ''}>${c.html}</th>`).join('');
    const others = body.map((cells) => `<tr>${cells.map((c) => `<td>${c.html}</td>`).join('')}</tr>`).join('');
    table.replaceWith(`${caption ? `<p>${caption}</p>` : ''}<table><thead><tr>${heading}</tr></thead><tbody>${others}</tbody></table>`);
  }
}

/** The table's own rows (not those of a table inside it): heading rows first, footer rows last. */
function ownRows($: CheerioAPI, table: any): any[] {
  const rows = $(table).find('tr').filter((_, tr) => $(tr).closest('table')[0] === table).toArray();
  const section = (tr: any) => ($(tr).parent().is('thead') ? 0 : $(tr).parent().is('tfoot') ? 2 : 1);
  return [0, 1, 2].flatMap((s) => rows.filter((tr) => section(tr) === s));
}

/** The rows' cells, a cell spanning columns or rows followed or covered by empty cells, so columns line up. */
function gridOf($: CheerioAPI, rows: any[]): Cell[][] {
  // How many more rows a cell above still covers, by column.
  let covered: number[] = [];
  return rows.map((tr) => {
    const cells: Cell[] = [];
    const next: number[] = [];
    const fillCovered = () => {
      while ((covered[cells.length] ?? 0) > 0) {
        next[cells.length] = covered[cells.length] - 1;
        cells.push(emptyCell());
      }
    };
    for (const el of $(tr).children('td, th').toArray()) {
      fillCovered();
      const cell = $(el);
      const cols = span(cell.attr('colspan'));
      const rowsDown = span(cell.attr('rowspan')) - 1;
      const align = /^(left|right|center)$/i.exec(cell.attr('align') ?? '')?.[1].toLowerCase() ?? '';
      for (let k = 0; k < cols; k++) {
        next[cells.length] = rowsDown;
        cells.push(k === 0 ? { html: cell.html() ?? '', align } : emptyCell());
      }
    }
    if (cells.length) fillCovered();
    covered = next;
    return cells;
  });
}

function span(value: string | undefined): number {
  return Math.min(Math.max(Number.parseInt(value ?? '1', 10) || 1, 1), MAX_SPAN);
}

/**
 * After the gfm plugin: every table is converted (never kept as HTML), and a cell's content stays on its row, a
 * `|` in it escaped.
 */
export function tableRules(service: TurndownService): void {
  service.addRule('tableAlways', {
    filter: 'table',
    replacement: (content) => `\n\n${content.replace(/\n{2,}/g, '\n')}\n\n`,
  });
  service.addRule('tableCellOnOneLine', {
    filter: ['th', 'td'],
    replacement: (content, node) => {
      const text = content.replace(/\s*\n\s*/g, ' ').trim().replace(/\|/g, '\\|');
      return `${node.previousSibling ? ' ' : '| '}${text} |`;
    },
  });
}
