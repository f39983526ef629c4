import path from 'node:path';
import { OutputBudget } from '#src/tools/text-lines.ts';
import type { Tool } from '#src/tools/types.ts';
import { resolveWorkspaceFolder, type WorkspaceRules } from '#src/tools/workspace.ts';
import { SKIPPED_FOLDERS, walkWorkspace, workspacePattern } from '#src/tools/workspace-walk.ts';

interface Args {
  pattern: string;
  path?: string;
}

export const MAX_GLOB_RESULTS = 200;

/** Finds workspace files by name pattern, newest first. */
export function createGlobTool(deps: WorkspaceRules = {}): Tool<Args> {
  return {
    name: 'glob',
    description:
      'Find files in your workspace by name pattern ("**/*.md", "uploads/*.pdf", "src/**/*.{ts,tsx}"), newest first, ' +
      `at most ${MAX_GLOB_RESULTS}. path is the folder to search (default: the whole workspace); ${SKIPPED_FOLDERS.join(' and ')} are skipped unless the path or pattern names them.`,
    parameters: {
      type: 'object',
      additionalProperties: false,
      required: ['pattern'],
      properties: {
        pattern: { type: 'string', minLength: 1 },
        path: { type: 'string', minLength: 1, description: 'a folder relative to your workspace' },
      },
    },
    timeoutMs: 30_000,
    allowRepeat: true,
    async run(args, ctx) {
      let root: string;
      let base: string;
      let pattern: string;
      try {
        root = await resolveWorkspaceFolder(ctx.persona);
        base = await resolveWorkspaceFolder(ctx.persona, args.path, deps);
        pattern = workspacePattern(root, base, args.pattern);
      } catch (err) {
        return `error: ${(err as Error).message}`;
      }
      const where = args.path ?? 'your workspace';
      const named = SKIPPED_FOLDERS.some((name) => pattern.split('/').includes(name) || path.relative(root, base).split(path.sep).includes(name));
      const files = await walkWorkspace(root, base, [pattern], { ...deps, signal: ctx.signal, skipFolders: !named });
      if (files.length === 0) return `no files match "${args.pattern}" in ${where}`;
      files.sort((a, b) => b.stat.mtimeMs - a.stat.mtimeMs || (a.relative < b.relative ? -1 : 1));
      const budget = new OutputBudget();
      let shown = 0;
      while (shown < Math.min(files.length, MAX_GLOB_RESULTS) && budget.add(files[shown].relative)) shown++;
      if (shown === files.length) return budget.text();
      return `${budget.text()}\n[${shown} of ${files.length} files shown, newest first; narrow the pattern or the path to see the rest]`;
    },
  };
}
