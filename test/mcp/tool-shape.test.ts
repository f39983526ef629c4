// How an MCP tool looks to the model: its name, its parameters and its result text.
import { Ajv } from 'ajv';
import { describe, expect, it } from 'vitest';
import { distinctToolName, formatToolResult, listNames, parlorToolName, toolParameters } from '#src/mcp/tool-shape.ts';

describe('MCP tool names', () => {
  it('are mcp_<server>_<tool> in [a-z0-9_]', () => {
    expect(parlorToolName('files', 'read_file')).toBe('mcp_files_read_file');
    expect(parlorToolName('files', 'Read-File.v2')).toBe('mcp_files_read_file_v2');
    expect(parlorToolName('gh', 'createPullRequest')).toBe('mcp_gh_create_pull_request');
    expect(parlorToolName('gh', '--')).toBe('mcp_gh_tool');
  });

  it('are at most 64 characters, and two long names stay apart', () => {
    const a = parlorToolName('search_engine', `${'x'.repeat(70)}_alpha`);
    const b = parlorToolName('search_engine', `${'x'.repeat(70)}_beta`);
    expect(a).toMatch(/^mcp_search_engine_x+_[0-9a-f]{8}$/);
    expect(a.length).toBe(64);
    expect(b.length).toBe(64);
    expect(a).not.toBe(b);
    const twin = distinctToolName('mcp_files_read', 'files', 'READ');
    expect(twin).toMatch(/^mcp_files_read_[0-9a-f]{8}$/);
  });

  it('are matched in allow and deny by the MCP name, the sanitized name or the whole name', () => {
    expect(listNames(['readFile'], 'files', 'readFile')).toBe(true);
    expect(listNames(['read_file'], 'files', 'readFile')).toBe(true);
    expect(listNames(['mcp_files_read_file'], 'files', 'readFile')).toBe(true);
    expect(listNames(['write_file'], 'files', 'readFile')).toBe(false);
  });
});

describe('MCP tool parameters', () => {
  const ajv = new Ajv({ allErrors: true, strict: false });

  it("are the server's input schema without $schema", () => {
    const shaped = toolParameters({ $schema: 'https://json-schema.org/draft/2020-12/schema', type: 'object', properties: { q: { type: 'string' } } }, ajv);
    expect(shaped).toEqual({ parameters: { type: 'object', properties: { q: { type: 'string' } } }, replaced: false });
  });

  it('are any object when the schema does not compile', () => {
    expect(toolParameters({ type: 'object', properties: { q: { $ref: '#/nowhere' } } }, ajv)).toEqual({ parameters: { type: 'object', additionalProperties: true }, replaced: true });
  });
});

describe('MCP tool results', () => {
  it('join text and describe the other parts', () => {
    const png = Buffer.alloc(2048).toString('base64');
    expect(
      formatToolResult({
        content: [
          { type: 'text', text: 'first' },
          { type: 'image', mimeType: 'image/png', data: png },
          { type: 'audio', mimeType: 'audio/wav', data: Buffer.alloc(100).toString('base64') },
          { type: 'resource_link', uri: 'file:///notes.md', name: 'notes' },
          { type: 'resource', resource: { uri: 'file:///a.txt', text: 'inside a' } },
          { type: 'resource', resource: { uri: 'file:///b.bin', mimeType: 'application/zip', blob: Buffer.alloc(3 * 1024 * 1024).toString('base64') } },
        ],
      }),
    ).toBe('first\n[image/png, 2 KB]\n[audio/wav, 100 B]\n[link: notes file:///notes.md]\n[file:///a.txt]\ninside a\n[file:///b.bin, application/zip, 3.0 MB]');
  });

  it('say error: for isError, and something for an empty result', () => {
    expect(formatToolResult({ isError: true, content: [{ type: 'text', text: 'no such file' }] })).toBe('error: no such file');
    expect(formatToolResult({ isError: true, content: [] })).toBe('error: the tool reported an error and said nothing more');
    expect(formatToolResult({ content: [] })).toBe('(the tool returned nothing)');
    expect(formatToolResult({ content: [], structuredContent: { n: 1 } })).toBe('{"n":1}');
  });
});
