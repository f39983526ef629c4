// parlor doctor --persona NAME: the tools each kind of turn sees, computed as a turn computes them (deny by group,
// the subagent deny list, what asks first, and the search tier to activate).
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseSettings } from '../../src/config/env.ts';
import { runDoctor } from '../../src/doctor.ts';
import { createMcpToolProvider } from '../../src/mcp/index.ts';
import { MemoryRegistry } from '../../src/memory/store.ts';
import { ToolCatalog } from '../../src/tools/catalog.ts';
import type { Tool } from '../../src/tools/types.ts';
import { createBuiltinTools } from '../../tools/index.ts';
import { TEST_PERSONA, writePersonas } from '../support/harness.ts';
import { FAST, stdioEntry } from '../support/mcp-fixtures.ts';

let personasDir: string;
const custom: Tool = { name: 'dns_lookup', description: 'Resolve a name.', group: 'custom', tier: 'search', parameters: { type: 'object' }, run: async () => 'ok' };

beforeAll(async () => {
  personasDir = await writePersonas({
    testy: { ...TEST_PERSONA, tools: { deny: ['group:web'], approve: ['group:fs'] } },
  });
});
afterAll(async () => {
  await fs.rm(personasDir, { recursive: true, force: true });
});

async function doctor(persona: string): Promise<{ code: number; lines: string[] }> {
  let out = '';
  const stream = new Writable({ write: (chunk, _enc, done) => ((out += String(chunk)), done()) });
  // No database: the checks that need one fail, and the tool list is still printed.
  const settings = parseSettings({ DATABASE_URL: 'postgres://127.0.0.1:9/x', LLM_BASE_URL: 'http://127.0.0.1:9/v1', LLM_MODEL: 'x', PARLOR_PERSONAS_DIR: personasDir });
  const tools = createBuiltinTools({ timezone: 'UTC', memory: new MemoryRegistry() });
  const catalog = new ToolCatalog(tools, [{ name: 'custom', tools: () => [custom] }]);
  const code = await runDoctor(settings, stream, { tools, catalog, persona });
  return { code, lines: out.split('\n') };
}

describe('parlor doctor --persona', () => {
  it('lists the tools of each kind of turn, with what asks first and what is there to activate', async () => {
    const { lines } = await doctor('testy');
    const at = lines.indexOf('Tools of persona testy, by kind of turn:');
    expect(at).toBeGreaterThan(0);
    const user = lines.find((l) => l.startsWith('  user: '))!;
    const subagent = lines.find((l) => l.startsWith('  subagent: '))!;
    const cron = lines.find((l) => l.startsWith('  cron: '))!;
    expect(user).toMatch(/^ {2}user: \d+ tools: /);
    expect(user).toContain('file_read (asks first)');
    expect(user).toContain('shell_exec (asks first)');
    expect(user).toContain('ask_user');
    expect(user).not.toContain('web_fetch');
    expect(subagent).not.toMatch(/\bask_user\b|\bsend_message\b/);
    expect(cron).toContain('end_task');
    expect(lines).toContain('    and 1 to activate with tool_activate: dns_lookup');
    expect(user).toContain('tool_activate');
  });

  it('says there is no such persona, and counts it as a problem', async () => {
    const { lines } = await doctor('nobody');
    expect(lines).toContain('✗ tools of nobody: there is no persona named "nobody" (the personas are testy)');
  });
});

describe('parlor doctor and custom tool folders', () => {
  it("names each folder that does not load, and accepts a persona's lists naming its custom tools", async () => {
    const dir = await writePersonas({ testy: { ...TEST_PERSONA, tools: { activate: ['dns_lookup'] } } });
    try {
      let out = '';
      const stream = new Writable({ write: (chunk, _enc, done) => ((out += String(chunk)), done()) });
      const settings = parseSettings({ DATABASE_URL: 'postgres://127.0.0.1:9/x', LLM_BASE_URL: 'http://127.0.0.1:9/v1', LLM_MODEL: 'x', PARLOR_PERSONAS_DIR: dir });
      const tools = createBuiltinTools({ timezone: 'UTC' });
      const catalog = new ToolCatalog(tools, [{ name: 'custom', tools: () => [custom] }]);
      const problems = { problems: async () => [`${dir}/testy/tools/broken/tool.json: /name is missing`] };
      await runDoctor(settings, stream, { tools, catalog, customTools: problems });
      const lines = out.split('\n');
      expect(lines.find((l) => l.startsWith('✓ personas:'))).toBeDefined();
      expect(lines).toContain(`! custom tools: ${dir}/testy/tools/broken/tool.json: /name is missing`);
    } finally {
      await fs.rm(dir, { recursive: true, force: true });
    }
  });
});

describe('parlor doctor and MCP servers', () => {
  it("starts each declared server and lists its state and tools; --persona shows them to activate", async () => {
    const home = await fs.mkdtemp(path.join(os.tmpdir(), 'parlor-doctor-mcp-'));
    const dir = await writePersonas({ testy: TEST_PERSONA });
    const globalFile = path.join(home, 'mcp.jsonc');
    await fs.writeFile(globalFile, JSON.stringify({ servers: { local: stdioEntry({ allow: ['echo', 'add'] }), gone: { command: 'no-such-mcp-server-here' } } }));
    const mcp = createMcpToolProvider({ ...FAST, globalFile });
    try {
      let out = '';
      const stream = new Writable({ write: (chunk, _enc, done) => ((out += String(chunk)), done()) });
      const settings = parseSettings({ DATABASE_URL: 'postgres://127.0.0.1:9/x', LLM_BASE_URL: 'http://127.0.0.1:9/v1', LLM_MODEL: 'x', PARLOR_PERSONAS_DIR: dir, PARLOR_HOME: home });
      const tools = createBuiltinTools({ timezone: 'UTC' });
      await runDoctor(settings, stream, { tools, catalog: new ToolCatalog(tools, [mcp]), mcp, persona: 'testy' });
      expect(out).toMatch(/! MCP servers: 2 servers:\n {4}local \(global, stdio\): connected \(pid \d+\), 2 tools: mcp_local_(echo|add), mcp_local_(echo|add)\n {4}gone \(global, stdio\): down: .*no-such-mcp-server-here/);
      expect(out).toMatch(/ {4}and 2 to activate with tool_activate: mcp_local_\w+, mcp_local_\w+/);
    } finally {
      await mcp.close();
      await fs.rm(home, { recursive: true, force: true });
      await fs.rm(dir, { recursive: true, force: true });
    }
  });
});
