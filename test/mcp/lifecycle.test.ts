// MCP servers that fail: exit mid-call, never start, never answer, stop answering pings; and close() stopping all.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createMcpToolProvider, formatMcpStatus, mcpStatusHasProblems, type McpToolProvider } from '#src/mcp/index.ts';
import { FAST, isAlive, makeMcpHome, runTool, stdioEntry, type McpHome } from '../support/mcp-fixtures.ts';
import { makeToolContext } from '../support/persona.ts';
import { until } from '../support/until.ts';

let home: McpHome;
let provider: McpToolProvider | undefined;

beforeEach(async () => {
  home = await makeMcpHome();
});

afterEach(async () => {
  await provider?.close();
  provider = undefined;
  await home.remove();
});

const pidOf = (p: McpToolProvider, name: string) => p.status().servers.find((s) => s.name === name)?.pid;

describe('MCP server failures', () => {
  it('a server that exits mid-call gives a clear result, is reported down, and is reconnected for the next call', async () => {
    await home.writeGlobal({ servers: { fragile: stdioEntry() } });
    const persona = await home.persona('ana');
    provider = createMcpToolProvider({ ...FAST, globalFile: home.globalFile, reconnect: { initialMs: 1_500, maxMs: 5_000 } });
    const tools = await provider.tools(persona);
    const ctx = makeToolContext({ persona });
    const firstPid = pidOf(provider, 'fragile')!;
    expect(firstPid).toBeGreaterThan(0);

    const crashed = await runTool(tools, 'mcp_fragile_crash', {}, ctx);
    expect(crashed).toMatch(/^error: MCP server "fragile" stopped while crash was running \(it exited with code 3: crashing on purpose\); reconnecting in [12] s\.$/);
    // Until it is back, a call says so at once.
    expect(await runTool(tools, 'mcp_fragile_echo', { text: 'hi' }, ctx)).toMatch(
      /^error: MCP server "fragile" is not connected \(it exited with code 3: crashing on purpose; reconnecting in [12] s\)$/,
    );
    const down = provider.status().servers[0];
    expect(down).toMatchObject({ name: 'fragile', state: 'down', error: 'it exited with code 3: crashing on purpose' });
    expect(formatMcpStatus(provider.status())[0]).toMatch(/^fragile \(global, stdio\): down: it exited with code 3: crashing on purpose; reconnecting in [12] s$/);

    await until(() => provider!.status().servers[0].state === 'connected', 'the reconnection', 20_000);
    // The tools of the earlier list still work: they reach the server through its current connection.
    expect(await runTool(tools, 'mcp_fragile_echo', { text: 'back again' }, ctx)).toBe('back again');
    expect(pidOf(provider, 'fragile')).not.toBe(firstPid);
    expect(isAlive(firstPid)).toBe(false);
  });

  it('a server whose command does not exist is down with the reason, and tools() does not wait for it', async () => {
    await home.writeGlobal({ servers: { ghost: { command: 'parlor-no-such-mcp-server', args: ['--stdio'] }, good: stdioEntry({ allow: ['echo'] }) } });
    const persona = await home.persona('ana');
    provider = createMcpToolProvider({ globalFile: home.globalFile, reconnect: { initialMs: 5_000 } });
    const started = Date.now();
    const tools = await provider.tools(persona);
    // At most the first-connect wait (2 s) for the good server, which may take longer than that to start.
    expect(Date.now() - started).toBeLessThan(3_500);
    expect(tools.every((t) => t.server === 'good')).toBe(true);
    const ghost = provider.status().servers.find((s) => s.name === 'ghost')!;
    expect(ghost).toMatchObject({ state: 'down', error: 'its command "parlor-no-such-mcp-server" was not found' });
    expect(ghost.retryInMs).toBeGreaterThan(0);
    expect(mcpStatusHasProblems(provider.status())).toBe(true);

    // Later calls never wait, whatever the servers do.
    const again = Date.now();
    await provider.tools(persona);
    expect(Date.now() - again).toBeLessThan(500);
    await until(async () => (await provider!.tools(persona)).some((t) => t.name === 'mcp_good_echo'), 'the good server', 20_000);
  });

  it('a server that never answers initialize is "connecting", then down after the connect timeout', async () => {
    await home.writeGlobal({ servers: { mute: { command: process.execPath, args: ['-e', 'setInterval(() => {}, 1000)'] } } });
    const persona = await home.persona('ana');
    provider = createMcpToolProvider({ globalFile: home.globalFile, connectTimeoutMs: 3_000, reconnect: { initialMs: 60_000 } });
    const started = Date.now();
    expect(await provider.tools(persona)).toEqual([]);
    expect(Date.now() - started).toBeLessThan(3_000);
    expect(provider.status().servers[0].state).toBe('connecting');
    const status = await provider.check([persona], { waitMs: 10_000 });
    expect(status.servers[0]).toMatchObject({ state: 'down', error: 'it did not answer within 3 s' });
  });

  it('a server that exits at start is down with its exit code and what it wrote to stderr', async () => {
    await home.writeGlobal({ servers: { broken: { command: process.execPath, args: ['-e', 'console.error("Error: no config file"); process.exit(1)'] } } });
    const persona = await home.persona('ana');
    provider = createMcpToolProvider({ globalFile: home.globalFile, reconnect: { initialMs: 60_000 } });
    const status = await provider.check([persona]);
    expect(status.servers[0]).toMatchObject({ state: 'down', error: 'it exited with code 1: Error: no config file' });
  });

  it('a server that stops answering pings is restarted', async () => {
    await home.writeGlobal({ servers: { sleepy: stdioEntry({ allow: ['echo'] }) } });
    const persona = await home.persona('ana');
    provider = createMcpToolProvider({ ...FAST, globalFile: home.globalFile, pingIntervalMs: 500 });
    const tools = await provider.tools(persona);
    const pid = pidOf(provider, 'sleepy')!;
    process.kill(pid, 'SIGSTOP');
    try {
      await until(() => provider!.status().servers[0].state !== 'connected', 'the failed ping', 10_000);
      expect(provider.status().servers[0].error).toMatch(/^it did not answer a ping/);
      await until(() => provider!.status().servers[0].state === 'connected', 'the restart', 30_000);
    } finally {
      if (isAlive(pid)) process.kill(pid, 'SIGCONT');
    }
    expect(pidOf(provider, 'sleepy')).not.toBe(pid);
    await until(() => !isAlive(pid), 'the stopped server to be gone', 10_000);
    expect(await runTool(tools, 'mcp_sleepy_echo', { text: 'awake' }, makeToolContext({ persona }))).toBe('awake');
  });

  it('close() stops every server process, global and per persona', async () => {
    await home.writeGlobal({ servers: { shared: stdioEntry({ allow: ['echo', 'slow'] }) } });
    const ana = await home.persona('ana', { servers: { own: stdioEntry({ allow: ['echo'] }) } });
    const bob = await home.persona('bob', { servers: { own: stdioEntry({ allow: ['echo'] }) } });
    provider = createMcpToolProvider({ ...FAST, globalFile: home.globalFile });
    const status = await provider.check([ana, bob]);
    expect(status.servers.map((s) => `${s.persona ?? 'global'}/${s.name}:${s.state}`).sort()).toEqual(['ana/own:connected', 'bob/own:connected', 'global/shared:connected']);
    const pids = status.servers.map((s) => s.pid!);
    expect(new Set(pids).size).toBe(3);
    // A call in flight does not keep its server alive.
    const tools = await provider.tools(ana);
    const inFlight = runTool(tools, 'mcp_shared_slow', {}, makeToolContext({ persona: ana }));
    await new Promise((r) => setTimeout(r, 200));

    await provider.close();
    expect(pids.filter(isAlive)).toEqual([]);
    expect(await inFlight).toMatch(/^error: /);
    expect(await provider.tools(ana)).toEqual([]);
    provider = undefined;
  });
});
