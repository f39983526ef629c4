// A streamable-HTTP MCP server: headers from the persona's secrets, a refused token, and a server that goes away.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMcpToolProvider, type McpToolProvider } from '#src/mcp/index.ts';
import { startMcpHttpServer, type McpHttpServer } from '../support/mcp-http-server.ts';
import { FAST, makeMcpHome, runTool, type McpHome } from '../support/mcp-fixtures.ts';
import { makeToolContext } from '../support/persona.ts';

const TOKEN = 'weather-token-5f2d9c1e';
let home: McpHome;
let server: McpHttpServer;
const providers: McpToolProvider[] = [];

beforeAll(async () => {
  home = await makeMcpHome();
  server = await startMcpHttpServer({ token: TOKEN });
});

afterAll(async () => {
  await Promise.all(providers.map((p) => p.close()));
  await server.close();
  await home.remove();
});

function provider(): McpToolProvider {
  const created = createMcpToolProvider({ ...FAST, globalFile: home.globalFile, reconnect: { initialMs: 30_000 } });
  providers.push(created);
  return created;
}

describe('a streamable-HTTP MCP server', () => {
  it('is called with the Authorization header made from a persona secret', async () => {
    const persona = await home.persona(
      'ana',
      { servers: { weather: { url: server.url, headers: { Authorization: 'Bearer $WEATHER_TOKEN', 'X-Caller': 'parlor' } } } },
      { WEATHER_TOKEN: TOKEN },
    );
    const mcp = provider();
    const tools = await mcp.tools(persona);
    expect(tools.map((t) => t.name).sort()).toEqual(['mcp_weather_flood', 'mcp_weather_forecast', 'mcp_weather_weather']);
    expect(tools[0]).toMatchObject({ group: 'mcp', server: 'weather', tier: 'search' });

    const ctx = makeToolContext({ persona });
    expect(await runTool(tools, 'mcp_weather_weather', { city: 'Lisbon' }, ctx)).toBe('sunny in Lisbon');
    // Structured content alone is shown as JSON.
    expect(await runTool(tools, 'mcp_weather_forecast', {}, ctx)).toBe('{"tomorrow":"rain"}');
    const posts = server.requests.filter((r) => r.method === 'POST');
    expect(posts.length).toBeGreaterThanOrEqual(4);
    for (const post of posts) expect(post.headers).toMatchObject({ authorization: `Bearer ${TOKEN}`, 'x-caller': 'parlor' });
  });

  it('cuts off an answer past 10 MB with a clear result, and the next call works', async () => {
    const persona = await home.persona('flooded', { servers: { weather: { url: server.url, headers: { Authorization: `Bearer ${TOKEN}` } } } });
    const mcp = provider();
    const tools = await mcp.tools(persona);
    const ctx = makeToolContext({ persona });
    const out = await runTool(tools, 'mcp_weather_flood', {}, ctx);
    expect(out).toBe('error: MCP server "weather" answered flood with more than 10 MB; the answer was dropped.');
    expect(out.length).toBeLessThan(1000);
    expect(await runTool(tools, 'mcp_weather_weather', { city: 'Oslo' }, ctx)).toBe('sunny in Oslo');
  });

  it('is down, saying what the server answered, when the token is wrong', async () => {
    const persona = await home.persona('bob', { servers: { weather: { url: server.url, headers: { Authorization: 'Bearer $WEATHER_TOKEN' } } } }, { WEATHER_TOKEN: 'wrong-token-123456' });
    const status = await provider().check([persona]);
    expect(status.servers[0].state).toBe('down');
    expect(status.servers[0].error).toBe('it answered HTTP 401: {"error":"missing or wrong bearer token"}');
    // The secret is never in what doctor shows.
    expect(JSON.stringify(status)).not.toContain('wrong-token-123456');
  });

  it('is down with the reason when a secret it names is missing, without trying to connect', async () => {
    const persona = await home.persona('cy', { servers: { weather: { url: server.url, headers: { Authorization: 'Bearer $WEATHER_TOKEN' } } } });
    const before = server.requests.length;
    const mcp = provider();
    expect(await mcp.tools(persona)).toEqual([]);
    expect(mcp.status().servers[0]).toMatchObject({
      state: 'down',
      error: `${persona.dir}/mcp.jsonc: /servers/weather/headers/Authorization names the secret WEATHER_TOKEN, which is not in ${persona.dir}/.env`,
    });
    expect(server.requests.length).toBe(before);
  });

  it('gives a clear result when the server has gone away', async () => {
    const gone = await startMcpHttpServer({ token: TOKEN });
    const persona = await home.persona('dee', { servers: { flaky: { url: gone.url, headers: { Authorization: `Bearer ${TOKEN}` } } } });
    const mcp = provider();
    const tools = await mcp.tools(persona);
    expect(tools.some((t) => t.name === 'mcp_flaky_weather')).toBe(true);
    await gone.close();
    const result = await runTool(tools, 'mcp_flaky_weather', { city: 'Oslo' }, makeToolContext({ persona }));
    expect(result).toMatch(/^error: MCP server "flaky" could not be reached \(fetch failed: .+\); reconnecting in \d+ s\.$/);
    expect(mcp.status().servers[0].state).toBe('down');
  });
});
