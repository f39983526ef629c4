import path from 'node:path';
import { findRipgrep, searchWithRipgrep } from '#src/tools/grep-ripgrep.ts';
import { compileQuery, formatHits, searchWithJs } from '#src/tools/grep-search.ts';
import type { Tool } from '#src/tools/types.ts';
import { resolveWorkspaceEntry, resolveWorkspaceFolder, type WorkspaceRules } from '#src/tools/workspace.ts';
import { SKIPPED_FOLDERS } from '#src/tools/workspace-walk.ts';

interface Args {
  pattern: string;
  path?: string;
  literal?: boolean;
  ignore_case?: boolean;
  include?: string;
  context?: number;
  max_results?: number;
}

export interface GrepOptions extends WorkspaceRules {
  /** ripgrep's path; false to always search in JavaScript. Default: `rg` when it is on PATH. */
  ripgrep?: string | false;
}

const DEFAULT_MAX_RESULTS = 100;

/** Searches the contents of workspace files, with ripgrep when it is installed and in JavaScript otherwise. */
export function createGrepTool(options: GrepOptions = {}): Tool<Args> {
  let rg: string | undefined | false = options.ripgrep;
  const rules: WorkspaceRules = { personaDirs: options.personaDirs };
  return {
    name: 'grep',
    description:
      'Search the contents of files in your workspace for a regular expression (literal: true for plain text), one line per match as ' +
      '"path:line:text" (lines around a match, with context, as "path-line-text"). path is a folder or file (default: the whole workspace); ' +
      `include is a glob for the files ("*.md", "src/**/*.ts"). Binary files, files over 10 MB and ${SKIPPED_FOLDERS.join('/')} are skipped.`,
    parameters: {
      type: 'object',
      additionalProperties: false,
      required: ['pattern'],
      properties: {
        pattern: { type: 'string', minLength: 1 },
        path: { type: 'string', minLength: 1, description: 'a folder or file relative to your workspace' },
        literal: { type: 'boolean' },
        ignore_case: { type: 'boolean' },
        include: { type: 'string', minLength: 1 },
        context: { type: 'integer', minimum: 0, maximum: 10 },
        max_results: { type: 'integer', minimum: 1, maximum: 500 },
      },
    },
    timeoutMs: 60_000,
    allowRepeat: true,
    async run(args, ctx) {
      const query = compileQuery({
        pattern: args.pattern,
        literal: args.literal ?? false,
        ignoreCase: args.ignore_case ?? false,
        include: args.include,
        context: args.context ?? 0,
        maxResults: args.max_results ?? DEFAULT_MAX_RESULTS,
      });
      if ('error' in query) return `error: ${query.error}`;
      if (query.include?.split(/[/\\]/).includes('..') || path.isAbsolute(query.include ?? '')) {
        return 'error: include is a glob relative to the folder searched ("*.md", "docs/**/*.txt"), without ".." or an absolute path';
      }
      let root: string;
      let base: { real: string; isFile: boolean };
      try {
        root = await resolveWorkspaceFolder(ctx.persona);
        const entry = await resolveWorkspaceEntry(ctx.persona, args.path ?? '.', rules);
        if (!entry.stat.isFile() && !entry.stat.isDirectory()) return `error: "${args.path}" is neither a file nor a folder`;
        base = { real: entry.real, isFile: entry.stat.isFile() };
      } catch (err) {
        return `error: ${(err as Error).message}`;
      }
      // .git and node_modules are searched when the path leads into them.
      const skipFolders = !path.relative(root, base.real).split(path.sep).some((part) => SKIPPED_FOLDERS.includes(part));
      const search = { ...rules, signal: ctx.signal, skipFolders };
      rg ??= findRipgrep() ?? false;
      // A pattern ripgrep does not take (look-around, back-references) goes to the JavaScript search, which bounds it.
      const hits = (rg ? await searchWithRipgrep(rg, ctx.persona, root, base, query, search) : undefined) ?? (await searchWithJs(ctx.persona, root, base, query, search));
      if ('error' in hits) return `error: ${hits.error}`;
      if (hits.files.length === 0) return `no matches for ${JSON.stringify(args.pattern)} in ${args.path ?? 'your workspace'}`;
      return formatHits(hits, query);
    },
  };
}
