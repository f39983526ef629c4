import { decodeText, numberedLine, OutputBudget, splitLines } from '#src/tools/text-lines.ts';
import type { Tool } from '#src/tools/types.ts';
import type { WorkspaceRules } from '#src/tools/workspace.ts';
import { isPdf, readWorkspaceFile } from '#src/tools/workspace-read.ts';
import { pdfPages } from '#src/tools/pdf-text.ts';

interface Args {
  path: string;
  offset?: number;
  limit?: number;
}

export const DEFAULT_READ_LINES = 400;
const MAX_READ_LINES = 2000;

/**
 * Reads a text file or a PDF's text from the persona's workspace (uploaded attachments are under `uploads/`), with
 * numbered lines, a window of them at a time. Never bytes: a binary file gets an error saying what to do instead.
 */
export function createFileReadTool(deps: WorkspaceRules = {}): Tool<Args> {
  return {
    name: 'file_read',
    description:
      'Read a file from your workspace (uploaded attachments are in uploads/). Lines come numbered ("    12<tab>text"; the number is not part of the file), ' +
      `${DEFAULT_READ_LINES} at a time from offset (1-based line number; default 1); limit sets how many. ` +
      'PDFs are read as their text, page by page. Binary files and files over 10 MB are refused.',
    parameters: {
      type: 'object',
      additionalProperties: false,
      required: ['path'],
      properties: {
        path: { type: 'string', minLength: 1, description: 'relative to your workspace' },
        offset: { type: 'integer', minimum: 1 },
        limit: { type: 'integer', minimum: 1, maximum: MAX_READ_LINES },
      },
    },
    timeoutMs: 30_000,
    async run(args, ctx) {
      let lines: string[];
      try {
        const { bytes } = await readWorkspaceFile(ctx.persona, args.path, deps);
        if (bytes.length === 0) return `"${args.path}" is empty (0 bytes)`;
        if (isPdf(bytes)) {
          lines = await pdfLines(args.path, bytes);
        } else {
          const text = decodeText(bytes);
          if (text === undefined) {
            return (
              `error: "${args.path}" is a binary file (${bytes.length} bytes), not text; file_read shows text files and PDFs only. ` +
              'Look at it with shell_exec (file, xxd | head) or send it on with send_message.'
            );
          }
          lines = splitLines(text);
        }
      } catch (err) {
        return `error: ${(err as Error).message}`;
      }
      return showLines(args.path, lines, args.offset ?? 1, args.limit ?? DEFAULT_READ_LINES);
    },
  };
}

function showLines(given: string, lines: readonly string[], offset: number, limit: number): string {
  if (offset > lines.length) return `error: offset ${offset} is past the end of "${given}", which has ${lines.length} lines; call file_read with a smaller offset`;
  const budget = new OutputBudget();
  const end = Math.min(lines.length, offset - 1 + limit);
  let shown = offset - 1;
  while (shown < end && budget.add(numberedLine(shown + 1, lines[shown]))) shown++;
  if (shown === lines.length) return budget.text();
  return `${budget.text()}\n[lines ${offset}-${shown} of ${lines.length}; call file_read with offset ${shown + 1} to read on]`;
}

/** A PDF's text as lines, each page opened by a `[page N of M]` line. */
async function pdfLines(given: string, bytes: Buffer): Promise<string[]> {
  const pages = await pdfPages(given, bytes);
  if (pages.every((page) => page.trim() === '')) {
    throw new Error(`"${given}" is a PDF of ${pages.length} page(s) with no text in it (scanned images, perhaps); file_read cannot show images`);
  }
  return pages.flatMap((page, index) => [`[page ${index + 1} of ${pages.length}]`, ...splitLines(page)]);
}
