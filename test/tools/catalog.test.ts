// Which tools a turn sees, and the names a persona's lists may use: tools, groups (group:fs, group:mcp:<server>),
// deny winning over everything, a task's limits, and the search tier.
import { describe, expect, it } from 'vitest';
import { badGroupEntry, entryNames, MAX_ACTIVE_TOOLS, ToolCatalog } from '../../src/tools/catalog.ts';
import { checkToolPolicies } from '../../src/tools/policy.ts';
import type { Tool } from '../../src/tools/types.ts';
import { BUILTIN_GROUPS, createBuiltinTools } from '../../tools/index.ts';
import { makePersona } from '../support/persona.ts';

const tool = (name: string, extra: Partial<Tool> = {}): Tool => ({ name, description: `${name}.`, parameters: { type: 'object' }, run: async () => 'ok', ...extra });
const mcp = (server: string, name: string) => tool(`mcp_${server}_${name}`, { group: 'mcp', server, tier: 'search' });
const names = (tools: readonly Tool[]) => tools.map((t) => t.name);

describe('group entries', () => {
  it('name tools by group, and an MCP server by its own group', () => {
    expect(entryNames('group:fs', tool('file_read', { group: 'fs' }))).toBe(true);
    expect(entryNames('group:web', tool('file_read', { group: 'fs' }))).toBe(false);
    expect(entryNames('group:mcp', mcp('files', 'read'))).toBe(true);
    expect(entryNames('group:mcp:files', mcp('files', 'read'))).toBe(true);
    expect(entryNames('group:mcp:files', mcp('mail', 'send'))).toBe(false);
    expect(entryNames('group:other', tool('clock', { group: 'other' }))).toBe(false);
  });

  it('refuse a group that does not exist, naming the ones that do', () => {
    expect(badGroupEntry('group:fss')).toMatch(/^"group:fss" is not a group; the groups are group:fs, group:web, .* and group:mcp:<server>$/);
    expect(badGroupEntry('group:fs:x')).toBeDefined();
    expect(badGroupEntry('group:mcp:files')).toBeUndefined();
    expect(badGroupEntry('shell_exec')).toBeUndefined();
  });

  it('every built-in but a handful is in a group', () => {
    const ungrouped = createBuiltinTools({ timezone: 'UTC' }).filter((t) => t.group === 'other').map((t) => t.name);
    expect(ungrouped.sort()).toEqual(['clock', 'end_task', 'think_harder', 'tool_activate', 'tool_search']);
    expect(Object.keys(BUILTIN_GROUPS).length).toBeGreaterThan(20);
  });
});

describe("a persona's lists", () => {
  const persona = (tools: Partial<ReturnType<typeof makePersona>['tools']>) => makePersona({ dir: '/p/ada', tools });

  it('may name tools, groups and MCP tools whose server has not answered yet', () => {
    expect(() => checkToolPolicies([persona({ deny: ['group:web'], approve: ['group:mcp:files', 'mcp_files_delete'], activate: ['dns_lookup'] })], ['dns_lookup', 'web_fetch'])).not.toThrow();
  });

  it('refuse a typo in a tool or a group, naming the file and the place', () => {
    expect(() => checkToolPolicies([persona({ approve: ['shell-exec'] })], ['shell_exec'])).toThrow('/p/ada/tools.jsonc: /approve/0 "shell-exec" is not a tool (did you mean "shell_exec"?)');
    expect(() => checkToolPolicies([persona({ deny: ['group:webb'] })], ['shell_exec'])).toThrow('/p/ada/tools.jsonc: /deny/0 "group:webb" is not a group');
    expect(() => checkToolPolicies([persona({ activate: ['dns_lookpu'] })], ['dns_lookup'])).toThrow('/activate/0 "dns_lookpu" is not a tool (did you mean "dns_lookup"?)');
  });

  it("check each persona against its own tools (a custom tool one has and another lacks)", () => {
    const ada = persona({ activate: ['dns_lookup'] });
    const bob = makePersona({ name: 'bob', dir: '/p/bob', tools: { activate: ['dns_lookup'] } });
    const own = (p: { name: string }) => (p.name === ada.name ? ['dns_lookup'] : []);
    expect(() => checkToolPolicies([ada, bob], own)).toThrow('/p/bob/tools.jsonc: /activate/0 "dns_lookup" is not a tool');
  });
});

describe('a turn of the catalog', () => {
  const builtins = [tool('end_task'), tool('file_read', { group: 'fs' }), tool('send_message', { group: 'messaging' }), tool('tool_search'), tool('tool_activate')];
  const providers = [{ name: 'mcp', tools: () => [mcp('files', 'read'), mcp('files', 'delete'), mcp('mail', 'send')] }];
  const catalog = new ToolCatalog(builtins, providers);

  it('hides what is denied by group, even when another list names it', async () => {
    const turn = await catalog.forTurn({ persona: makePersona({ tools: { deny: ['group:mcp:files'], activate: ['mcp_files_read'], allow: ['group:fs'] } }), kind: 'user' });
    expect(names(turn.callable())).toEqual(['end_task', 'file_read', 'send_message', 'tool_search', 'tool_activate']);
    expect(names(turn.listed())).toEqual(['mcp_mail_send']);
  });

  it('offers no tool_search or tool_activate when nothing is left to find', async () => {
    const turn = await catalog.forTurn({ persona: makePersona({ tools: { deny: ['group:mcp'] } }), kind: 'user' });
    expect(names(turn.callable())).toEqual(['end_task', 'file_read', 'send_message']);
  });

  it('gives a task what it was given by name at once (nothing more to find), and never the tools that talk to people', async () => {
    const given = await catalog.forTurn({ persona: makePersona(), kind: 'task', task: { depth: 1, tools: ['file_read', 'mcp_files_read', 'send_message'] } });
    expect(names(given.callable())).toEqual(['end_task', 'file_read', 'mcp_files_read']);
    const all = await catalog.forTurn({ persona: makePersona(), kind: 'task', task: { depth: 1, tools: null } });
    expect(names(all.callable())).toEqual(['end_task', 'file_read', 'tool_search', 'tool_activate']);
    expect(names(all.listed())).toEqual(['mcp_files_read', 'mcp_files_delete', 'mcp_mail_send']);
  });

  it('keeps at most the newest activations, and says which made room', async () => {
    const many = new ToolCatalog(builtins, [{ name: 'custom', tools: () => Array.from({ length: MAX_ACTIVE_TOOLS + 2 }, (_, i) => tool(`t${i}`, { group: 'custom', tier: 'search' })) }]);
    const turn = await many.forTurn({ persona: makePersona(), kind: 'user', active: Array.from({ length: MAX_ACTIVE_TOOLS }, (_, i) => `t${i}`) });
    expect(turn.activate(`t${MAX_ACTIVE_TOOLS}`)).toMatchObject({ evicted: 't0' });
    expect(turn.activeNames()).toHaveLength(MAX_ACTIVE_TOOLS);
    expect(turn.inactive('t0')).toBe(true);
    expect(turn.activate('file_read')).toEqual({ error: 'file_read is always callable; there is no need to activate it' });
    expect(turn.activate('nope')).toEqual({ error: 'there is no tool named "nope" to activate; tool_search finds them' });
  });

  it("keeps the activations of tools another kind of turn has, when a turn without them activates one", async () => {
    const kinds = new ToolCatalog(builtins, [{ name: 'custom', tools: () => [tool('user_only', { group: 'custom', tier: 'search', contexts: ['user'] }), tool('any_kind', { group: 'custom', tier: 'search' })] }]);
    const cron = await kinds.forTurn({ persona: makePersona(), kind: 'cron', active: ['user_only'] });
    expect(names(cron.callable())).not.toContain('user_only');
    cron.activate('any_kind');
    expect(cron.activeNames()).toEqual(['user_only', 'any_kind']);
  });

  it("shows a custom or MCP tool's description and schema with secrets masked, the same object turn after turn", async () => {
    const leaky = tool('leaky', {
      group: 'mcp',
      server: 'x',
      tier: 'search',
      description: 'Uses token Sup3r-Secret-Value-42 and key sk-proj-abcdefghijklmnopqrstuvwxyz012345.',
      parameters: { type: 'object', properties: { q: { type: 'string', description: 'default Sup3r-Secret-Value-42' } } },
    });
    const secretive = new ToolCatalog(builtins, [{ name: 'mcp', tools: () => [leaky] }]);
    const persona = makePersona({ secrets: { API: 'Sup3r-Secret-Value-42' } });
    const first = (await secretive.forTurn({ persona, kind: 'user' })).listed()[0]!;
    expect(first.description).toBe('Uses token [REDACTED] and key [REDACTED].');
    expect(JSON.stringify(first.parameters)).not.toContain('Sup3r');
    expect((await secretive.forTurn({ persona, kind: 'user' })).listed()[0]).toBe(first);
    expect(leaky.description).toContain('Sup3r');
  });

  it('leaves out a provider that fails, and a provided tool whose name a built-in has', async () => {
    const shaky = new ToolCatalog(builtins, [
      { name: 'custom', tools: () => Promise.reject(new Error('disk gone')) },
      { name: 'mcp', tools: () => [tool('file_read', { tier: 'search' }), mcp('mail', 'send')] },
    ]);
    expect(names(await shaky.all(makePersona()))).toEqual([...names(builtins), 'mcp_mail_send']);
  });
});
