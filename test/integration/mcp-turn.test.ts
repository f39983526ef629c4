// An MCP server through real turns: declared in a persona's mcp.jsonc while Parlor runs, its tools listed, activated
// and called; a call that never answers ends in a timeout result and the turn still answers; a server that asks
// first unless the persona allows it.
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createMcpToolProvider, type McpToolProvider } from '../../src/mcp/index.ts';
import { lastToolResult } from '../support/fake-llm.ts';
import { startHarness, TEST_PERSONA, type Harness } from '../support/harness.ts';
import { FAST, stdioEntry } from '../support/mcp-fixtures.ts';

describe('an MCP server in a turn', () => {
  let h: Harness;
  let mcp: McpToolProvider;
  beforeAll(async () => {
    // The provider Parlor makes, but with room for the test server's first start on a busy machine (a turn waits 2 s
    // for it by default, and the server would be listed from the next turn).
    mcp = createMcpToolProvider({ ...FAST, globalFile: path.join(os.tmpdir(), 'parlor-no-global-mcp.jsonc') });
    h = await startHarness({ personas: { testy: { ...TEST_PERSONA, tools: { allow: ['group:mcp:local'] } } }, app: { toolProviders: [mcp] } });
    await fs.writeFile(path.join(h.personasDir, 'testy', 'mcp.jsonc'), JSON.stringify({ servers: { local: stdioEntry({ timeoutSeconds: 1, allow: ['add', 'slow'] }) } }));
  });
  afterAll(async () => {
    await h?.stop();
    await mcp?.close();
  });
  beforeEach(() => {
    h.fake.reset();
    h.chat.sent.length = 0;
  });

  it('lists its tools once declared, and a call through tool_activate reaches the server', async () => {
    h.fake.script(
      { toolCalls: [{ name: 'tool_activate', arguments: { name: 'mcp_local_add' } }] },
      { toolCalls: [{ name: 'mcp_local_add', arguments: { a: 2, b: 40 } }] },
      (req) => ({ text: `the sum is ${lastToolResult(req)}` }),
    );
    await h.chat.inject({ text: 'add 2 and 40' });
    const [reply] = await h.chat.waitForSent(1, 30_000);
    expect(h.fake.requests[0].system).toContain('- mcp_local_add: Adds two numbers.');
    expect(h.fake.requests[0].system).not.toContain('mcp_local_echo');
    expect(reply.text).toBe('the sum is 42');
    await h.app.waitForIdle('testy:chat:u1');
  });

  it('a call that never answers gives the model a timeout, and the turn still answers', async () => {
    h.fake.script(
      { toolCalls: [{ name: 'tool_activate', arguments: { name: 'mcp_local_slow' } }] },
      { toolCalls: [{ name: 'mcp_local_slow', arguments: {} }] },
      (req) => ({ text: `tool said: ${lastToolResult(req).split(';')[0]}` }),
    );
    const started = Date.now();
    await h.chat.inject({ text: 'try the slow one' });
    const [reply] = await h.chat.waitForSent(1, 30_000);
    expect(reply.text).toBe('tool said: timeout: MCP server "local" did not answer slow within 1 s');
    expect(Date.now() - started).toBeLessThan(15_000);
    await h.app.waitForIdle('testy:chat:u1');
  });
});
