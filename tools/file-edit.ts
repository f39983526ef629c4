import { decodeText, numberedLine, splitLines } from '#src/tools/text-lines.ts';
import type { Tool } from '#src/tools/types.ts';
import { resolveWorkspaceTarget, type WorkspaceRules } from '#src/tools/workspace.ts';
import { readWorkspaceFile } from '#src/tools/workspace-read.ts';
import { writeText } from './file-write.ts';

interface Args {
  path: string;
  old_string: string;
  new_string: string;
  replace_all?: boolean;
}

/** Lines of the file shown around an edit, so the model sees it landed where it meant. */
const CONTEXT_LINES = 3;
const MAX_EDITED_BYTES = 10 * 1024 * 1024;

/** Replaces an exact piece of text in a workspace file (unique unless replace_all), written atomically like file_write. */
export function createFileEditTool(deps: WorkspaceRules = {}): Tool<Args> {
  return {
    name: 'file_edit',
    description:
      'Replace exact text in a file of your workspace: old_string must appear exactly once (copy it from file_read without the line numbers, ' +
      'with enough surrounding lines to be unique), or set replace_all to replace every occurrence. To create a file, use file_write.',
    parameters: {
      type: 'object',
      additionalProperties: false,
      required: ['path', 'old_string', 'new_string'],
      properties: {
        path: { type: 'string', minLength: 1, description: 'relative to your workspace' },
        old_string: { type: 'string' },
        new_string: { type: 'string' },
        replace_all: { type: 'boolean' },
      },
    },
    timeoutMs: 30_000,
    approval: { summary: (args) => `edit ${args.path}: replace ${JSON.stringify(args.old_string)} with ${JSON.stringify(args.new_string)}${args.replace_all ? ' everywhere' : ''}` },
    async run(args, ctx) {
      if (args.old_string === '') return 'error: old_string is empty; give the exact text to replace (to create a file or replace all of it, use file_write)';
      if (args.old_string === args.new_string) return 'error: old_string and new_string are the same, so there is nothing to change';
      let text: string;
      try {
        const target = await resolveWorkspaceTarget(ctx.persona, args.path, deps);
        if (!target.stat) return `error: "${args.path}" does not exist; use file_write to create it`;
        const { bytes } = await readWorkspaceFile(ctx.persona, args.path, deps);
        const decoded = decodeText(bytes);
        if (decoded === undefined) return `error: "${args.path}" is not a text file (binary or not UTF-8), so file_edit cannot change it`;
        text = decoded;
      } catch (err) {
        return `error: ${(err as Error).message}`;
      }
      let { old_string: from, new_string: to } = args;
      // The model writes \n; a file with Windows line ends keeps them.
      if (!text.includes(from) && text.includes('\r\n') && from.includes('\n') && text.includes(from.replaceAll('\n', '\r\n'))) {
        from = from.replaceAll('\n', '\r\n');
        to = to.replaceAll('\n', '\r\n');
      }
      const count = occurrences(text, from);
      if (count === 0) return `error: old_string was not found in "${args.path}"; ${notFoundHint(text, from)}`;
      if (count > 1 && !args.replace_all) {
        return `error: old_string matches ${count} times in "${args.path}"; add surrounding lines to make it unique, or set replace_all: true to replace all ${count}`;
      }
      const first = text.indexOf(from);
      const edited = args.replace_all ? text.replaceAll(from, () => to) : text.slice(0, first) + to + text.slice(first + from.length);
      const content = Buffer.from(edited, 'utf8');
      if (content.length > MAX_EDITED_BYTES) return `error: the edited file would be ${content.length} bytes, over file_edit's 10 MB limit; nothing was changed`;
      const written = await writeText(ctx.persona, args.path, content, { overwrite: true, rules: deps });
      if (written.startsWith('error:')) return written;
      return `replaced ${count} occurrence${count === 1 ? '' : 's'} in ${args.path}\n${around(edited, first, to)}`;
    },
  };
}

function occurrences(text: string, part: string): number {
  let count = 0;
  for (let at = text.indexOf(part); at !== -1; at = text.indexOf(part, at + part.length)) count++;
  return count;
}

function notFoundHint(text: string, from: string): string {
  if (/^ *\d+\t/m.test(from)) return 'it seems to include file_read\'s line numbers ("    12<tab>"), which are not part of the file; leave them out';
  const squeeze = (s: string) => s.replace(/\s+/g, ' ').trim();
  if (squeeze(text).includes(squeeze(from))) return 'it is there with different spaces, tabs or line breaks; read the file with file_read and copy the text exactly';
  if (text.toLowerCase().includes(from.toLowerCase())) return 'it is there in different upper/lower case; copy it exactly';
  return 'read the file with file_read and copy the text exactly, with its whitespace and indentation';
}

/** The first edit with a few lines around it, numbered as file_read numbers them. */
function around(edited: string, start: number, inserted: string): string {
  const lines = splitLines(edited);
  const firstLine = edited.slice(0, start).split('\n').length;
  const lastLine = firstLine + Math.max(0, inserted.split('\n').length - 1);
  const from = Math.max(1, firstLine - CONTEXT_LINES);
  const to = Math.min(lines.length, lastLine + CONTEXT_LINES, from + 40);
  const shown: string[] = [];
  for (let n = from; n <= to; n++) shown.push(numberedLine(n, lines[n - 1]));
  return shown.join('\n');
}
