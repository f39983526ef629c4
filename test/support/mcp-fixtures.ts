// Builders for the MCP client's tests: a Parlor home and persona folders with mcp.jsonc files, the stdio test
// server's entry, and a call through the ToolRunner as the agent loop makes it.
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Persona } from '#src/config/persona.ts';
import { ToolRunner } from '#src/tools/runner.ts';
import type { Tool, ToolContext } from '#src/tools/types.ts';
import { makePersona } from './persona.ts';

export const REPO_ROOT = fileURLToPath(new URL('../..', import.meta.url));
const STDIO_SERVER = fileURLToPath(new URL('./mcp-stdio-server.ts', import.meta.url));

/** An mcp.jsonc entry that starts test/support/mcp-stdio-server.ts (tsx resolves from the repository). */
export function stdioEntry(extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { command: process.execPath, args: ['--import', 'tsx', STDIO_SERVER], cwd: REPO_ROOT, ...extra };
}

/** Settings that keep tests short: quick reconnects, no pings unless a test wants them, room for a slow start. */
export const FAST = { pingIntervalMs: 600_000, connectTimeoutMs: 20_000, firstConnectWaitMs: 20_000, reconnect: { initialMs: 200, maxMs: 2_000 } };

export interface McpHome {
  dir: string;
  globalFile: string;
  writeGlobal(config: unknown): Promise<void>;
  /** A persona whose folder holds the given mcp.jsonc (none when `config` is undefined). */
  persona(name: string, config?: unknown, secrets?: Record<string, string>): Promise<Persona>;
  writePersona(persona: Persona, config: unknown): Promise<void>;
  remove(): Promise<void>;
}

export async function makeMcpHome(): Promise<McpHome> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'parlor-mcp-'));
  const globalFile = path.join(dir, 'mcp.jsonc');
  const write = (file: string, config: unknown) => fs.writeFile(file, typeof config === 'string' ? config : JSON.stringify(config, null, 2));
  return {
    dir,
    globalFile,
    writeGlobal: (config) => write(globalFile, config),
    async persona(name, config, secrets = {}) {
      const personaDir = path.join(dir, 'personas', name);
      await fs.mkdir(path.join(personaDir, 'workspace'), { recursive: true });
      if (config !== undefined) await write(path.join(personaDir, 'mcp.jsonc'), config);
      // MCP tools ask first unless allowed: these personas allow them, as an owner who set up the server would.
      return makePersona({ name, dir: personaDir, workspace: path.join(personaDir, 'workspace'), secrets, tools: { allow: ['group:mcp'] } });
    },
    writePersona: (persona, config) => write(path.join(persona.dir, 'mcp.jsonc'), config),
    remove: () => fs.rm(dir, { recursive: true, force: true }),
  };
}

/** Runs one call of `name` through a ToolRunner over `tools`, as the agent loop does; the result text. */
export async function runTool(tools: readonly Tool[], name: string, args: unknown, ctx: ToolContext): Promise<string> {
  const output = await new ToolRunner(tools).execute({ id: 'call-1', name, arguments: JSON.stringify(args) }, tools, ctx);
  return output.content;
}

export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
