// Shared by the file tool tests: a temp personas folder with a workspace, running a tool as the model would (through
// the runner, so its arguments are validated), and a snapshot of a folder to show nothing in it changed.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ToolRunner } from '../../src/tools/runner.ts';
import type { Tool } from '../../src/tools/types.ts';
import { makePersona, makeToolContext, type TestToolContext } from '../support/persona.ts';

export interface FileToolsFixture {
  root: string;
  personasDir: string;
  workspace: string;
  persona: ReturnType<typeof makePersona>;
  ctx: TestToolContext;
  remove(): void;
}

/** `<tmp>/personas/tester/workspace`, empty; `root` is the real path of the temp folder. */
export function makeFileToolsFixture(prefix: string): FileToolsFixture {
  const root = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), prefix)));
  const personasDir = path.join(root, 'personas');
  const workspace = path.join(personasDir, 'tester', 'workspace');
  fs.mkdirSync(workspace, { recursive: true });
  const persona = makePersona({ dir: path.join(personasDir, 'tester'), workspace, users: ['telegram:1'] });
  const ctx = makeToolContext({ persona, origin: { connector: 'telegram', chat: '1', chatType: 'dm' } });
  return { root, personasDir, workspace, persona, ctx, remove: () => fs.rmSync(root, { recursive: true, force: true }) };
}

let callId = 0;

/** The result text the model reads for a call of `tool` with `args`. */
export async function runTool(tool: Tool, args: unknown, ctx: TestToolContext): Promise<string> {
  const runner = new ToolRunner([tool]);
  const output = await runner.execute({ id: `call_${++callId}`, name: tool.name, arguments: JSON.stringify(args) }, [tool], ctx);
  return output.content;
}

/** Every entry under `dir` (symlinks not followed) with its content or target, and its mode. */
export function snapshot(dir: string): Record<string, string> {
  const result: Record<string, string> = {};
  const walk = (folder: string) => {
    for (const name of fs.readdirSync(folder).sort()) {
      const full = path.join(folder, name);
      const stat = fs.lstatSync(full);
      const key = path.relative(dir, full);
      if (stat.isSymbolicLink()) result[key] = `-> ${fs.readlinkSync(full)}`;
      else if (stat.isDirectory()) {
        result[key] = `folder ${stat.mode.toString(8)}`;
        walk(full);
      } else result[key] = `${stat.mode.toString(8)} ${fs.readFileSync(full, 'utf8')}`;
    }
  };
  walk(dir);
  return result;
}
