// Custom tools a user adds as folders: in a persona's own `tools/` folder and in a folder shared by every persona
// (PARLOR_TOOLS_DIR). Each call of tools() looks at the folders again, so adding, changing or removing one takes
// effect on the next turn; a folder is read again only when its files' times change. The look is a few synchronous
// readdir and stat calls, microseconds each on a local disk; through fs/promises each cost a turn tens of them.
import fss, { type Dirent } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import type { Logger } from 'pino';
import type { Persona } from '#src/config/persona.ts';
import type { Tool, ToolProvider } from '#src/tools/types.ts';
import type { CustomToolCommands } from './commands.ts';
import { createCustomTool } from './custom-tool.ts';
import { readManifest } from './manifest.ts';

export type { CustomToolCommands } from './commands.ts';

export interface CustomToolProviderOptions {
  /** The folder of tools every persona gets (PARLOR_TOOLS_DIR); a persona's own tool of the same name wins. */
  sharedDir?: string;
  /** Names no custom tool may take: the built-in tools'. */
  reservedNames: readonly string[];
  /** How the tools' commands run: shell_exec's way (tools/shell-exec.ts `createCustomToolCommands`). */
  commands: CustomToolCommands;
  log: Logger;
}

export interface CustomToolProvider extends ToolProvider {
  readonly name: 'custom';
  tools(persona: Persona): Promise<Tool[]>;
  /** What is wrong with the persona's tool folders and the shared one, one line each (for `parlor doctor`). */
  problems(persona: Persona): Promise<string[]>;
}

interface Loaded {
  /** The times and sizes of the folder, its tool.json and its executable: when they change, it is read again. */
  signature: string;
  outcome: { tool: Tool; executable?: string } | { problem: string };
}

/** A persona's custom tools from its `tools/` folder and the shared folder. */
export function createCustomToolProvider(options: CustomToolProviderOptions): CustomToolProvider {
  const reserved = new Set(options.reservedNames);
  const sharedDir = options.sharedDir === undefined ? undefined : path.resolve(options.sharedDir);
  const loaded = new Map<string, Loaded>();
  // Two turns starting at once read a changed folder once.
  const loading = new Map<string, Promise<Loaded>>();
  // Problems found across folders (two with one name), by tools folder: each is logged when it first appears.
  const reported = new Map<string, Set<string>>();

  /** The tools in one tools folder by name, and its problems. */
  async function scan(root: string, persona: Persona | undefined): Promise<{ tools: Map<string, Tool>; problems: string[] }> {
    const tools = new Map<string, Tool>();
    const problems: string[] = [];
    const folders = await toolFolders(root, root === sharedDir);
    if ('problem' in folders) {
      report(root, [folders.problem], persona);
      return { tools, problems: [folders.problem] };
    }
    const seen = new Set(folders.list);
    for (const key of loaded.keys()) if (path.dirname(key) === root && !seen.has(key)) forget(key, persona);
    const owners = new Map<string, string>();
    const duplicates: string[] = [];
    for (const folder of folders.list) {
      const entry = await load(folder, persona);
      if ('problem' in entry.outcome) {
        problems.push(entry.outcome.problem);
        continue;
      }
      const { tool } = entry.outcome;
      const first = owners.get(tool.name);
      if (first) {
        duplicates.push(`${path.join(folder, 'tool.json')}: /name "${tool.name}" is taken by ${first} already; that one is used`);
        continue;
      }
      owners.set(tool.name, folder);
      tools.set(tool.name, tool);
    }
    // Each folder's own problem is logged when the folder is read; these come from comparing folders.
    report(root, duplicates, persona);
    return { tools, problems: [...problems, ...duplicates] };
  }

  /** A folder's tool, read again only when its signature changed. */
  function load(folder: string, persona: Persona | undefined): Promise<Loaded> {
    let pending = loading.get(folder);
    if (!pending) {
      pending = reload(folder, persona).finally(() => loading.delete(folder));
      loading.set(folder, pending);
    }
    return pending;
  }

  async function reload(folder: string, persona: Persona | undefined): Promise<Loaded> {
    const cached = loaded.get(folder);
    const executable = cached && 'tool' in cached.outcome ? cached.outcome.executable : undefined;
    const before = folderSignature(folder);
    if (cached && cached.signature === before + fileSignature(executable)) return cached;
    let outcome: Loaded['outcome'];
    try {
      const read = await readManifest(folder, reserved);
      outcome =
        'problem' in read
          ? read
          : { tool: createCustomTool(read.manifest, await fs.realpath(folder), options.commands), ...('run' in read.manifest.how ? { executable: read.manifest.how.run } : {}) };
    } catch (err) {
      outcome = { problem: `${folder} cannot be read (${(err as Error).message})` };
    }
    const fields = { folder, ...(persona && !isShared(folder) ? { persona: persona.name } : {}) };
    if ('problem' in outcome) options.log.warn(fields, `custom tool left out: ${outcome.problem}`);
    else options.log.info({ ...fields, tool: outcome.tool.name }, cached ? 'custom tool reloaded' : 'custom tool loaded');
    // Which executable to watch is known once tool.json has been read: its times are taken now.
    const entry = { signature: before + fileSignature('tool' in outcome ? outcome.executable : undefined), outcome };
    loaded.set(folder, entry);
    return entry;
  }

  function forget(folder: string, persona: Persona | undefined): void {
    const entry = loaded.get(folder);
    loaded.delete(folder);
    if (entry && 'tool' in entry.outcome) {
      options.log.info({ folder, tool: entry.outcome.tool.name, ...(persona && !isShared(folder) ? { persona: persona.name } : {}) }, 'custom tool removed');
    }
  }

  function report(root: string, problems: string[], persona: Persona | undefined): void {
    const before = reported.get(root) ?? new Set<string>();
    for (const problem of problems) {
      if (!before.has(problem)) options.log.warn({ folder: root, ...(persona && root !== sharedDir ? { persona: persona.name } : {}) }, `custom tool left out: ${problem}`);
    }
    reported.set(root, new Set(problems));
  }

  function isShared(folder: string): boolean {
    return sharedDir !== undefined && path.dirname(folder) === sharedDir;
  }

  async function collect(persona: Persona): Promise<{ tools: Tool[]; problems: string[] }> {
    const shared = sharedDir ? await scan(sharedDir, undefined) : { tools: new Map<string, Tool>(), problems: [] };
    const own = await scan(path.resolve(persona.dir, 'tools'), persona);
    // The persona's own tool of a name replaces the shared one.
    const tools = new Map([...shared.tools, ...own.tools]);
    return { tools: [...tools.values()], problems: [...own.problems, ...shared.problems] };
  }

  return {
    name: 'custom',
    async tools(persona) {
      try {
        return (await collect(persona)).tools;
      } catch (err) {
        options.log.warn({ persona: persona.name, err }, 'custom tools could not be read');
        return [];
      }
    },
    async problems(persona) {
      try {
        return (await collect(persona)).problems;
      } catch (err) {
        return [`custom tools could not be read (${(err as Error).message})`];
      }
    },
  };
}

/**
 * The tool folders in a tools folder, sorted (the first of two with one name wins). A persona without a `tools/`
 * folder has no custom tools; a shared folder that is missing is a problem, since someone named it.
 */
async function toolFolders(root: string, shared: boolean): Promise<{ list: string[] } | { problem: string }> {
  // Asked on every turn, and most personas have no tools folder: a missing one is found without an error thrown.
  if (!shared && !statOf(root)) return { list: [] };
  let entries: Dirent[];
  try {
    entries = fss.readdirSync(root, { withFileTypes: true });
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return shared ? { problem: `the shared tools folder ${root} (PARLOR_TOOLS_DIR) does not exist` } : { list: [] };
    if (code === 'ENOTDIR') return { problem: `${root} is not a folder; custom tools go in folders inside it, one per tool` };
    return { problem: `${root} cannot be read (${(err as Error).message})` };
  }
  const list: string[] = [];
  for (const entry of entries) {
    if (entry.name.startsWith('.')) continue;
    const full = path.join(root, entry.name);
    if (entry.isDirectory() || (entry.isSymbolicLink() && statOf(full)?.isDirectory())) list.push(full);
  }
  return { list: list.sort() };
}

/** The folder and everything directly in it (tool.json, a script just made executable) as they are now. */
function folderSignature(folder: string): string {
  let names: string[];
  try {
    names = fss.readdirSync(folder);
  } catch {
    names = [];
  }
  return [folder, ...names.sort().map((name) => path.join(folder, name))].map(fileSignature).join('|');
}

/** Name, inode, size, times and mode: what changes when a file is replaced, written or made executable. */
function fileSignature(file: string | undefined): string {
  if (!file) return '';
  const stat = statOf(file);
  return stat ? `|${path.basename(file)}:${stat.ino}:${stat.size}:${stat.mtimeMs}:${stat.ctimeMs}:${stat.mode}` : '|-';
}

/** The file's stat, following links; undefined when it is not there or cannot be looked at. */
function statOf(file: string): fss.Stats | undefined {
  try {
    return fss.statSync(file, { throwIfNoEntry: false });
  } catch {
    return undefined;
  }
}
