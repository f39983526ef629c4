// The search tier through real turns: custom and MCP tools are listed by name in the system prompt, tool_search
// shows their schemas, tool_activate makes one callable from the next model call (and for the conversation until
// /new), a persona can pre-activate them, deny (by name or group) hides them, and the prompt stays bounded however
// many there are.
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { MORE_TOOLS_PROMPT_MAX_CHARS } from '../../src/agent/prompt.ts';
import type { Tool, ToolProvider } from '../../src/tools/types.ts';
import { lastToolResult } from '../support/fake-llm.ts';
import { startHarness, TEST_PERSONA, type Harness } from '../support/harness.ts';

/** A provider of `count` search-tier tools (dns_lookup first), each recording its calls. */
function provider(count = 3): ToolProvider & { calls: string[] } {
  const calls: string[] = [];
  const make = (name: string, description: string): Tool => ({
    name,
    description,
    group: 'custom',
    tier: 'search',
    parameters: { type: 'object', additionalProperties: false, required: ['q'], properties: { q: { type: 'string' } } },
    run: async (args: { q: string }) => {
      calls.push(`${name}:${args.q}`);
      return `${name} says ${args.q}`;
    },
  });
  const tools = [
    make('dns_lookup', 'Resolve a host name to its addresses. Uses the office resolver.'),
    make('crm_find', 'Find a customer in the CRM by name or email.'),
    ...Array.from({ length: Math.max(0, count - 2) }, (_, i) => make(`extra_tool_${i}`, `Extra tool number ${i} that does something quite specific and is described at some length.`)),
  ];
  return { name: 'custom', calls, tools: () => tools };
}

describe('search-tier tools in a turn', () => {
  let h: Harness;
  const tools = provider();
  beforeAll(async () => {
    h = await startHarness({ app: { toolProviders: [tools] } });
  });
  afterAll(() => h?.stop());
  beforeEach(() => {
    h.fake.reset();
    h.chat.sent.length = 0;
    tools.calls.length = 0;
  });

  it('lists them by name only; a call before activation is refused, tool_activate makes it callable from the next call', async () => {
    h.fake.script(
      { toolCalls: [{ name: 'dns_lookup', arguments: { q: 'early' } }] },
      { toolCalls: [{ name: 'tool_search', arguments: { query: 'resolve host' } }] },
      { toolCalls: [{ name: 'tool_activate', arguments: { name: 'dns_lookup' } }] },
      { toolCalls: [{ name: 'dns_lookup', arguments: { q: 'example.org' } }] },
      { text: 'Resolved.' },
    );
    await h.chat.inject({ text: 'resolve example.org' });
    await h.chat.waitForSent(1);
    await h.app.waitForIdle('testy:chat:u1');
    const [first, afterEarly, afterSearch, afterActivate, last] = h.fake.requests;
    expect(first.toolNames).toEqual(expect.arrayContaining(['tool_search', 'tool_activate', 'clock']));
    expect(first.toolNames).not.toContain('dns_lookup');
    expect(first.system).toContain('## More tools');
    expect(first.system).toContain('- dns_lookup: Resolve a host name to its addresses.');
    expect(first.system).not.toContain('office resolver');
    expect(lastToolResult(afterEarly)).toMatch(/^not_active: dns_lookup is not active yet; call tool_activate/);
    expect(lastToolResult(afterSearch)).toContain('dns_lookup: Resolve a host name');
    expect(lastToolResult(afterSearch)).toContain('"required":["q"]');
    expect(afterSearch.toolNames).not.toContain('dns_lookup');
    expect(lastToolResult(afterActivate)).toMatch(/^activated dns_lookup: you can call it from your next step/);
    expect(afterActivate.toolNames).toContain('dns_lookup');
    expect(lastToolResult(last)).toBe('dns_lookup says example.org');
    expect(tools.calls).toEqual(['dns_lookup:example.org']);
    // The system prompt did not change as the tool was activated: the provider's prompt cache keeps working.
    expect(new Set(h.fake.requests.map((r) => r.system)).size).toBe(1);
  });

  it('stays active in the next turns of the conversation, and /new forgets it', async () => {
    h.fake.script({ toolCalls: [{ name: 'dns_lookup', arguments: { q: 'again' } }] }, { text: 'Again.' });
    await h.chat.inject({ text: 'once more' });
    await h.chat.waitForSent(1);
    await h.app.waitForIdle('testy:chat:u1');
    expect(h.fake.requests[0].toolNames).toContain('dns_lookup');
    expect(tools.calls).toEqual(['dns_lookup:again']);
    await h.chat.inject({ text: '/new' });
    await h.chat.waitForSent(2);
    h.fake.reset();
    h.fake.script({ text: 'Fresh.' });
    await h.chat.inject({ text: 'hello' });
    await h.chat.waitForSent(3);
    await h.app.waitForIdle('testy:chat:u1');
    expect(h.fake.requests[0].toolNames).not.toContain('dns_lookup');
    expect(await h.query(sql`select active_tools from conversations where id = 'testy:chat:u1'`)).toEqual([{ active_tools: [] }]);
  });

  it('keeps each conversation to its own activations', async () => {
    h.fake.script({ toolCalls: [{ name: 'tool_activate', arguments: { name: 'crm_find' } }] }, { text: 'Ready.' });
    await h.chat.inject({ text: 'get ready', chat: { id: 'u2', type: 'dm' }, sender: { id: 'u2' } });
    await h.chat.waitForSent(1);
    await h.app.waitForIdle('testy:chat:u2');
    h.fake.reset();
    h.fake.script({ text: 'Hi.' });
    await h.chat.inject({ text: 'hi' });
    await h.chat.waitForSent(2);
    await h.app.waitForIdle('testy:chat:u1');
    expect(h.fake.requests[0].toolNames).not.toContain('crm_find');
  });
});

describe("a persona's tools.jsonc and the search tier", () => {
  let h: Harness;
  const tools = provider();
  beforeAll(async () => {
    h = await startHarness({
      personas: {
        testy: { ...TEST_PERSONA, tools: { activate: ['crm_find'] } },
        closed: { ...TEST_PERSONA, connectors: { users: ['chat:u9'] }, tools: { deny: ['group:custom'] } },
      },
      app: { toolProviders: [tools] },
    });
  });
  afterAll(() => h?.stop());

  it('a pre-activated tool is callable from the first call; the others are still listed', async () => {
    h.fake.script({ text: 'Hello.' });
    await h.chat.inject({ text: 'hi' });
    await h.chat.waitForSent(1);
    await h.app.waitForIdle('testy:chat:u1');
    const [request] = h.fake.requests;
    expect(request.toolNames).toContain('crm_find');
    expect(request.toolNames).not.toContain('dns_lookup');
    expect(request.system).toContain('- dns_lookup:');
    expect(request.system).not.toContain('- crm_find:');
  });

  it('a denied group hides its tools, and with none left there is no tool_search either', async () => {
    h.fake.reset();
    h.fake.script({ text: 'Hello.' });
    await h.chat.inject({ text: 'hi', chat: { id: 'u9', type: 'dm' }, sender: { id: 'u9' } });
    await h.chat.waitForSent(2);
    await h.app.waitForIdle('closed:chat:u9');
    const [request] = h.fake.requests;
    expect(request.toolNames).not.toEqual(expect.arrayContaining(['crm_find']));
    expect(request.toolNames.filter((n) => /dns_lookup|crm_find|tool_search|tool_activate/.test(n))).toEqual([]);
    expect(request.system).not.toContain('## More tools');
  });
});

describe('the prompt with many search-tier tools', () => {
  it('grows by a bounded listing, whether there are 50 or 500', async () => {
    const sizes: number[] = [];
    for (const count of [50, 500]) {
      const h = await startHarness({ app: { toolProviders: [provider(count)] } });
      try {
        h.fake.script({ text: 'Hello.' });
        await h.chat.inject({ text: 'hi' });
        await h.chat.waitForSent(1);
        await h.app.waitForIdle('testy:chat:u1');
        const [request] = h.fake.requests;
        const section = request.system.slice(request.system.indexOf('## More tools'), request.system.indexOf('## Now'));
        expect(section.length).toBeLessThanOrEqual(MORE_TOOLS_PROMPT_MAX_CHARS + 2);
        expect(section).toMatch(/- \(\d+ more: tool_search finds them\)/);
        sizes.push(JSON.stringify(request.body).length);
      } finally {
        await h.stop();
      }
    }
    expect(Math.abs(sizes[1]! - sizes[0]!)).toBeLessThan(sizes[0]! * 0.01);
  });
});
