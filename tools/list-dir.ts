import fs from 'node:fs/promises';
import path from 'node:path';
import { formatBytes } from '#src/tools/text-lines.ts';
import type { Tool } from '#src/tools/types.ts';
import { inOtherPersonaDir, isSecretName, resolveWorkspaceEntry, type WorkspaceRules } from '#src/tools/workspace.ts';
import { withWorkspaceFolder, WorkspacePathError, type WorkspaceFolder } from '#src/tools/workspace-io.ts';
import { SKIPPED_FOLDERS } from '#src/tools/workspace-walk.ts';

interface Args {
  path?: string;
  depth?: number;
}

export const MAX_LIST_ENTRIES = 500;
const MAX_DEPTH = 5;

interface Listing {
  lines: string[];
  secrets: number;
  cut: boolean;
}

/**
 * Lists a workspace folder: each entry's type and size, sorted by name, folders followed by what is in them down to
 * `depth`. Walked through workspace-io.ts, so a symlink is shown, never followed. `.env*` files are not listed.
 */
export function createListDirTool(deps: WorkspaceRules = {}): Tool<Args> {
  return {
    name: 'list_dir',
    description:
      `List a folder of your workspace (default: the workspace itself): type, size and path of each entry, at most ${MAX_LIST_ENTRIES}. ` +
      `depth 1 (default) lists the folder only; up to ${MAX_DEPTH} goes that many levels down. Paths shown are relative to your workspace.`,
    parameters: {
      type: 'object',
      additionalProperties: false,
      properties: {
        path: { type: 'string', minLength: 1, description: 'a folder relative to your workspace' },
        depth: { type: 'integer', minimum: 1, maximum: MAX_DEPTH },
      },
    },
    timeoutMs: 30_000,
    allowRepeat: true,
    async run(args, ctx) {
      const given = args.path ?? '.';
      const listing: Listing = { lines: [], secrets: 0, cut: false };
      try {
        await fs.mkdir(ctx.persona.workspace, { recursive: true });
        const { root, real, stat } = await resolveWorkspaceEntry(ctx.persona, given, deps);
        if (!stat.isDirectory()) return `error: "${given}" is a file, not a folder; read it with file_read`;
        await withWorkspaceFolder(ctx.persona.workspace, path.relative(root, real), { rules: deps }, (folder) => list(folder, 1, args.depth ?? 1, listing, deps));
      } catch (err) {
        if (err instanceof WorkspacePathError) return `error: "${given}" changed while it was being listed (${err.message}); try again`;
        return `error: ${(err as Error).message}`;
      }
      const notes: string[] = [];
      if (listing.cut) notes.push(`[cut at ${MAX_LIST_ENTRIES} entries; list a folder further down, or use a smaller depth or glob]`);
      if (listing.secrets) notes.push(`[${listing.secrets} secrets file(s) (.env*) not shown]`);
      if (listing.lines.length === 0) return [`"${given}" is an empty folder`, ...notes].join('\n');
      return [...listing.lines, ...notes].join('\n');
    },
  };
}

async function list(folder: WorkspaceFolder, level: number, depth: number, listing: Listing, rules: WorkspaceRules): Promise<void> {
  const names = (await folder.names()).sort();
  for (const name of names) {
    if (isSecretName(name)) {
      listing.secrets++;
      continue;
    }
    if (listing.lines.length >= MAX_LIST_ENTRIES) {
      listing.cut = true;
      return;
    }
    const relative = path.join(folder.relative, name);
    const stat = await fs.lstat(folder.at(name)).catch(() => undefined);
    if (!stat) continue;
    if (stat.isSymbolicLink()) {
      const target = await fs.readlink(folder.at(name)).catch(() => '?');
      listing.lines.push(entry('symlink', '-', `${relative} -> ${target}`));
    } else if (stat.isDirectory()) {
      if (await inOtherPersonaDir(folder.root, path.join(folder.root, relative), rules)) continue;
      const skipped = SKIPPED_FOLDERS.includes(name) && level < depth;
      listing.lines.push(entry('folder', '-', `${relative}/${skipped ? ' (not listed further; list_dir it to see inside)' : ''}`));
      if (level < depth && !skipped) {
        const child = await folder.child(name).catch(() => undefined);
        if (!child) continue;
        try {
          await list(child, level + 1, depth, listing, rules);
        } finally {
          await child.close();
        }
        if (listing.cut) return;
      }
    } else {
      listing.lines.push(entry(stat.isFile() ? 'file' : 'other', stat.isFile() ? formatBytes(stat.size) : '-', relative));
    }
  }
}

function entry(type: string, size: string, relative: string): string {
  return `${type.padEnd(7)} ${size.padStart(8)}  ${relative}`;
}
