// A stdio MCP server's tools through the ToolRunner: results, errors, timeouts, the turn's stop, its environment,
// and a tools/list_changed notification.
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Persona } from '#src/config/persona.ts';
import { createMcpToolProvider, type McpToolProvider } from '#src/mcp/index.ts';
import { ToolRunner } from '#src/tools/runner.ts';
import { FAST, makeMcpHome, REPO_ROOT, runTool, stdioEntry, type McpHome } from '../support/mcp-fixtures.ts';
import { makeToolContext } from '../support/persona.ts';
import { until } from '../support/until.ts';

let home: McpHome;
let provider: McpToolProvider;
let persona: Persona;
const saved = { DATABASE_URL: process.env.DATABASE_URL, PARLOR_API_TOKEN: process.env.PARLOR_API_TOKEN };

beforeAll(async () => {
  // Parlor's own secrets are in its environment; a server must see none of them.
  process.env.DATABASE_URL = 'postgres://parlor:hunter2@127.0.0.1/parlor';
  process.env.PARLOR_API_TOKEN = 'api-token-that-stays-home';
  home = await makeMcpHome();
  await home.writeGlobal({
    servers: {
      local: stdioEntry({ env: { GIVEN_VALUE: '$SHARED_KEY', PLAIN: 'literal value', PRICE: '$$5' } }),
      quick: stdioEntry({ timeoutSeconds: 1, allow: ['slow', 'stats'] }),
    },
  });
  persona = await home.persona('ana');
  provider = createMcpToolProvider({ ...FAST, globalFile: home.globalFile, env: { SHARED_KEY: 'shared-secret-value' } });
});

afterAll(async () => {
  await provider.close();
  await home.remove();
  for (const [name, value] of Object.entries(saved)) {
    if (value === undefined) delete process.env[name];
    else process.env[name] = value;
  }
});

describe('a stdio MCP server', () => {
  it('offers its tools as mcp_<server>_<tool> and answers a call through the ToolRunner', async () => {
    const tools = await provider.tools(persona);
    const local = tools.filter((t) => t.server === 'local').map((t) => t.name).sort();
    expect(local).toEqual(
      ['add', 'crash', 'echo', 'environment', 'fail', 'grow', 'picture', 'read_file_info', 'slow', 'stats'].map((n) => `mcp_local_${n}`),
    );
    const add = tools.find((t) => t.name === 'mcp_local_add')!;
    expect(add).toMatchObject({ group: 'mcp', server: 'local', tier: 'search', description: 'Adds two numbers.\nSecond line of the description.' });
    expect(add.parameters).toEqual({ type: 'object', properties: { a: { type: 'number' }, b: { type: 'number' } }, required: ['a', 'b'] });

    const ctx = makeToolContext({ persona });
    expect(await runTool(tools, 'mcp_local_add', { a: 2, b: 3 }, ctx)).toBe('5');
    expect(await runTool(tools, 'mcp_local_echo', { text: 'hello there' }, ctx)).toBe('hello there');
    expect(await runTool(tools, 'mcp_local_read_file_info', {}, ctx)).toBe('info');
    // The same objects while nothing changes (the runner compiles one validator per Tool object).
    const again = await provider.tools(persona);
    again.forEach((tool, i) => expect(tool).toBe(tools[i]));
    // The server's schema is the tool's parameters: the runner refuses a bad call before it reaches the server.
    expect(await runTool(tools, 'mcp_local_add', { a: 'two', b: 3 }, ctx)).toMatch(/^invalid_arguments: \/a must be number/);
  });

  it('asks a person before a call unless the persona allows the server, whatever the server says of its tools', async () => {
    const cautious = await home.persona('cautious');
    const owner = { ...cautious, tools: { ...cautious.tools, allow: [] } };
    const tools = await provider.tools(owner);
    const asked: string[] = [];
    const runner = new ToolRunner(tools, async ({ tool }) => {
      asked.push(tool.name);
      return { allowed: false, reason: 'no' };
    });
    const ctx = makeToolContext({ persona: owner });
    const call = (name: string, args: unknown) => runner.execute({ id: 'c', name, arguments: JSON.stringify(args) }, tools, ctx);
    expect((await call('mcp_local_echo', { text: 'hi' })).content).toBe('denied: mcp_local_echo did not run (no).');
    // The server marks this one read-only; a server is not taken at its word.
    expect((await call('mcp_local_read_file_info', {})).content).toBe('denied: mcp_local_read_file_info did not run (no).');
    expect(asked).toEqual(['mcp_local_echo', 'mcp_local_read_file_info']);
  });

  it('turns isError into an error result and describes parts that are not text', async () => {
    const tools = await provider.tools(persona);
    const ctx = makeToolContext({ persona });
    expect(await runTool(tools, 'mcp_local_fail', {}, ctx)).toBe('error: the disk is full');
    expect(await runTool(tools, 'mcp_local_picture', {}, ctx)).toBe('a red dot\n[image/png, 12 KB]');
  });

  it('offers only what allow lets through', async () => {
    const tools = await provider.tools(persona);
    expect(tools.filter((t) => t.server === 'quick').map((t) => t.name).sort()).toEqual(['mcp_quick_slow', 'mcp_quick_stats']);
  });

  it('gives a timeout result after timeoutSeconds for a tool that never answers, and cancels it on the server', async () => {
    const tools = await provider.tools(persona);
    const ctx = makeToolContext({ persona });
    const started = Date.now();
    const result = await runTool(tools, 'mcp_quick_slow', {}, ctx);
    const elapsed = Date.now() - started;
    expect(result).toBe('timeout: MCP server "quick" did not answer slow within 1 s; the call was cancelled.');
    expect(elapsed).toBeGreaterThanOrEqual(900);
    expect(elapsed).toBeLessThan(5_000);
    await until(async () => JSON.parse(await runTool(tools, 'mcp_quick_stats', {}, ctx)).cancelled === 1, 'the server to hear the cancellation');
  });

  it("stops a call at once when the turn's signal aborts", async () => {
    const tools = await provider.tools(persona);
    const turn = new AbortController();
    const ctx = makeToolContext({ persona, signal: turn.signal });
    const started = Date.now();
    setTimeout(() => turn.abort(), 300);
    const result = await runTool(tools, 'mcp_local_slow', {}, ctx);
    expect(result).toMatch(/^cancelled: /);
    expect(Date.now() - started).toBeLessThan(2_000);
    const stats = makeToolContext({ persona });
    await until(async () => JSON.parse(await runTool(tools, 'mcp_local_stats', {}, stats)).cancelled === 1, 'the server to hear the cancellation');
  });

  it("starts the server with a minimal environment plus its declared env, never Parlor's own", async () => {
    const tools = await provider.tools(persona);
    const report = JSON.parse(await runTool(tools, 'mcp_local_environment', {}, makeToolContext({ persona })));
    const env = report.env as Record<string, string>;
    expect(env.DATABASE_URL).toBeUndefined();
    expect(env.PARLOR_API_TOKEN).toBeUndefined();
    expect(env.SHARED_KEY).toBeUndefined();
    expect(env.PATH).toBe(process.env.PATH);
    expect(env.PLAIN).toBe('literal value');
    expect(env.PRICE).toBe('$5');
    // The secret arrived, and the model reads it masked.
    expect(report.digests.GIVEN_VALUE).toBe(createHash('sha256').update('shared-secret-value').digest('hex'));
    expect(env.GIVEN_VALUE).toBeDefined();
    expect(JSON.stringify(report)).not.toContain('shared-secret-value');
    expect(report.cwd).toBe(REPO_ROOT.replace(/\/$/, ''));
  });

  it('refreshes its tools when the server sends tools/list_changed', async () => {
    const tools = await provider.tools(persona);
    expect(tools.some((t) => t.name === 'mcp_local_late')).toBe(false);
    expect(await runTool(tools, 'mcp_local_grow', {}, makeToolContext({ persona }))).toBe('added late');
    const later = await until(async () => (await provider.tools(persona)).find((t) => t.name === 'mcp_local_late'), 'the new tool');
    expect(await runTool([later], 'mcp_local_late', {}, makeToolContext({ persona }))).toBe('late answer');
  });
});
