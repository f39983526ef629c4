// mcp.jsonc: errors that name the file and JSON path, allow and deny, a persona's server replacing the global one,
// edits taking effect on the next tools() call, and each file looked at once per call.
import fsSync from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { ConfigError } from '#src/config/errors.ts';
import { createMcpFileReader, createMcpToolProvider, formatMcpStatus, type McpToolProvider } from '#src/mcp/index.ts';
import { FAST, makeMcpHome, stdioEntry, type McpHome } from '../support/mcp-fixtures.ts';

let home: McpHome;

beforeAll(async () => {
  home = await makeMcpHome();
});

afterAll(async () => {
  await home.remove();
});

describe('reading mcp.jsonc', () => {
  const read = createMcpFileReader();
  async function problem(text: string): Promise<string> {
    const file = path.join(home.dir, 'check.jsonc');
    await fs.writeFile(file, text);
    try {
      read(file);
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      return (err as Error).message.replace(`${file}`, '<file>');
    }
    throw new Error('the file was accepted');
  }

  it('names the file and the JSON path of what is wrong', async () => {
    expect(await problem('{ "servers": { "files": { "command": "x", "args": "-v" } } }')).toBe('<file>: /servers/files/args must be array');
    expect(await problem('{ "servers": { "files": { "comand": "x" } } }')).toBe('<file>: /servers/files: unknown key "comand"');
    expect(await problem('{ "servers": { "files": { "command": "x", "timeoutSeconds": 0 } } }')).toBe('<file>: /servers/files/timeoutSeconds must be > 0');
    expect(await problem('{ "servers": { "files": { "command": "x", "env": { "TOKEN": 5 } } } }')).toBe('<file>: /servers/files/env/TOKEN must be string');
    expect(await problem('{ "servers": { "Files-2": { "command": "x" } } }')).toMatch(
      /^<file>: \/servers\/Files-2: a server name starts with a lowercase letter and uses lowercase letters, digits and _ .*mcp_<server>_<tool>/,
    );
    expect(await problem('{ "servers": { "web": { "command": "x", "url": "https://example.com/mcp" } } }')).toBe(
      '<file>: /servers/web has both "command" and "url"; a server is either a program to start or an HTTP endpoint',
    );
    expect(await problem('{ "servers": { "web": { "args": ["x"] } } }')).toMatch(/^<file>: \/servers\/web needs "command" .* or "url"/);
    expect(await problem('{ "servers": { "web": { "url": "ftp://example.com" } } }')).toBe('<file>: /servers/web/url "ftp://example.com" is not an http:// or https:// URL');
    expect(await problem('{ "servers": { "web": { "url": "https://example.com", "env": {} } } }')).toBe(
      '<file>: /servers/web/env is for "command" servers; this one has "url"',
    );
    expect(await problem('{ "servers": { "files": { "command": "x", "headers": {} } } }')).toBe('<file>: /servers/files/headers is for "url" servers; this one has "command"');
    expect(await problem('{\n  "servers": {\n    "files": { "command": "x" }\n    "web": {}\n  }\n}')).toBe('<file>:4:5: invalid JSONC (comma expected)');
  });

  it('accepts comments, trailing commas, an empty file and a disabled entry with no command', async () => {
    const file = path.join(home.dir, 'fine.jsonc');
    await fs.writeFile(file, '// servers\n{ "servers": { "files": { "command": "x", "args": ["a",], }, "old": { "disabled": true } }, }');
    const servers = read(file);
    expect(servers.map((s) => [s.name, s.transport, s.disabled, s.timeoutSeconds])).toEqual([
      ['files', 'stdio', false, 60],
      ['old', undefined, true, 60],
    ]);
    expect(servers[0].cwd).toBe(home.dir);
    await fs.writeFile(file, '// nothing yet\n');
    expect(read(file)).toEqual([]);
    expect(read(path.join(home.dir, 'absent.jsonc'))).toEqual([]);
  });
});

describe('the servers a persona gets', () => {
  let provider: McpToolProvider;

  beforeAll(async () => {
    await home.writeGlobal({ servers: { tools: stdioEntry({ allow: ['echo', 'add', 'stats'], deny: ['stats'] }), retired: { command: 'x', disabled: true } } });
    provider = createMcpToolProvider({ ...FAST, globalFile: home.globalFile });
  });

  afterAll(async () => {
    await provider.close();
  });

  const names = async (persona: Parameters<McpToolProvider['tools']>[0]) => (await provider.tools(persona)).map((t) => t.name).sort();

  it('filters by allow and deny (deny wins), and a persona server replaces the global one of its name', async () => {
    const bob = await home.persona('bob');
    expect(await names(bob)).toEqual(['mcp_tools_add', 'mcp_tools_echo']);
    const ana = await home.persona('ana', { servers: { tools: stdioEntry({ deny: ['mcp_tools_echo', 'crash'], allow: ['echo', 'crash', 'fail'] }) } });
    expect(await names(ana)).toEqual(['mcp_tools_fail']);
    const cy = await home.persona('cy', { servers: { tools: { disabled: true } } });
    expect(await names(cy)).toEqual([]);

    const lines = formatMcpStatus(provider.status());
    expect(lines).toEqual([
      expect.stringMatching(/^tools \(global, stdio\): connected \(pid \d+\), 2 tools: mcp_tools_echo, mcp_tools_add$/),
      'retired (global, stdio): disabled',
      expect.stringMatching(/^tools \(persona ana, stdio, replaces the global one\): connected \(pid \d+\), 1 tool: mcp_tools_fail$/),
      'tools (persona cy, replaces the global one): disabled',
    ]);
  });

  it('reads a changed mcp.jsonc on the next tools() call: a new deny list at once, a new command line by reconnecting', async () => {
    const dee = await home.persona('dee', { servers: { own: stdioEntry({ allow: ['echo', 'add'] }) } });
    expect(await names(dee)).toContain('mcp_own_add');
    const pid = () => provider.status().servers.find((s) => s.persona === 'dee')!.pid;
    const before = pid();

    await home.writePersona(dee, { servers: { own: stdioEntry({ allow: ['echo', 'add'], deny: ['add'] }) } });
    expect(await names(dee)).toEqual(['mcp_own_echo', 'mcp_tools_add', 'mcp_tools_echo']);
    expect(pid()).toBe(before);

    await home.writePersona(dee, { servers: { own: stdioEntry({ allow: ['echo'], env: { MODE: 'second' } }) } });
    expect(await names(dee)).toEqual(['mcp_own_echo', 'mcp_tools_add', 'mcp_tools_echo']);
    expect(pid()).not.toBe(before);

    await fs.rm(path.join(dee.dir, 'mcp.jsonc'));
    expect(await names(dee)).toEqual(['mcp_tools_add', 'mcp_tools_echo']);
  });

  it('keeps a file that breaks out of use, reporting it, and keeps the servers it declared before', async () => {
    const eve = await home.persona('eve', { servers: { own: stdioEntry({ allow: ['echo'] }) } });
    expect(await names(eve)).toContain('mcp_own_echo');
    await home.writePersona(eve, '{ "servers": { "own": { "command": 42 } } }');
    expect(await names(eve)).toContain('mcp_own_echo');
    const file = path.join(eve.dir, 'mcp.jsonc');
    const status = provider.status();
    expect(status.files).toEqual([{ file, error: `${file}: /servers/own/command must be string` }]);
    expect(formatMcpStatus(status)[0]).toBe(`error: ${file}: /servers/own/command must be string`);

    const fay = await home.persona('fay', '{ "servers": [] }');
    expect(await names(fay)).toEqual(['mcp_tools_add', 'mcp_tools_echo']);
    expect(provider.status().files.map((f) => f.error)).toContain(`${path.join(fay.dir, 'mcp.jsonc')}: /servers must be object`);
  });
});

describe('looking for mcp.jsonc', () => {
  it('looks at the global file and the persona\'s once per tools() call, whether or not they exist', async () => {
    // Every turn lists its tools: most find neither file, and each look is a system call.
    const globalFile = path.join(home.dir, 'absent', 'mcp.jsonc');
    const provider = createMcpToolProvider({ ...FAST, globalFile });
    const stat = vi.spyOn(fsSync, 'statSync');
    try {
      const gil = await home.persona('gil');
      const looks = async () => {
        stat.mockClear();
        expect(await provider.tools(gil)).toEqual([]);
        return stat.mock.calls.map(([file]) => String(file)).filter((file) => file.endsWith('mcp.jsonc')).sort();
      };
      expect(await looks()).toEqual([globalFile, path.join(gil.dir, 'mcp.jsonc')].sort());
      // With a file that declares no server, the same.
      await home.writePersona(gil, { servers: {} });
      expect(await looks()).toEqual([globalFile, path.join(gil.dir, 'mcp.jsonc')].sort());
    } finally {
      stat.mockRestore();
      await provider.close();
    }
  });
});
