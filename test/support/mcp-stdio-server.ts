// An MCP server on stdio for the MCP client's tests: `node --import tsx test/support/mcp-stdio-server.ts`.
// Its tools echo, add, sleep past any timeout, exit mid-call, report an error, show their environment and
// add a tool while connected (a tools/list_changed notification).
import { createHash } from 'node:crypto';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { z } from 'zod';

const server = new McpServer({ name: 'parlor-test-stdio', version: '1.0.0' });
let cancelled = 0;
let calls = 0;

server.registerTool('echo', { description: 'Returns the text it is given.', inputSchema: { text: z.string() } }, async ({ text }) => {
  calls++;
  return { content: [{ type: 'text', text }] };
});

server.registerTool('add', { description: 'Adds two numbers.\nSecond line of the description.', inputSchema: { a: z.number(), b: z.number() } }, async ({ a, b }) => {
  calls++;
  return { content: [{ type: 'text', text: String(a + b) }] };
});

server.registerTool('slow', { description: 'Never answers (until it is cancelled).' }, async (extra) => {
  calls++;
  await new Promise<void>((resolve) => {
    extra.signal.addEventListener('abort', () => {
      cancelled++;
      resolve();
    });
  });
  return { content: [{ type: 'text', text: 'cancelled' }] };
});

server.registerTool('crash', { description: 'The server exits while answering.' }, async () => {
  process.stderr.write('crashing on purpose\n');
  process.exit(3);
});

server.registerTool('fail', { description: 'Reports a failure.' }, async () => ({
  isError: true,
  content: [{ type: 'text', text: 'the disk is full' }],
}));

server.registerTool('picture', { description: 'Returns a caption and a picture.' }, async () => ({
  content: [
    { type: 'text', text: 'a red dot' },
    { type: 'image', mimeType: 'image/png', data: Buffer.alloc(12 * 1024, 7).toString('base64') },
  ],
}));

// With each value's SHA-256 too: the client masks secret values in results, and the digest shows what arrived.
server.registerTool('environment', { description: 'Returns its environment and working folder as JSON.' }, async () => {
  const digests = Object.fromEntries(Object.entries(process.env).map(([k, v]) => [k, createHash('sha256').update(v ?? '').digest('hex')]));
  return { content: [{ type: 'text', text: JSON.stringify({ env: process.env, digests, cwd: process.cwd(), pid: process.pid }) }] };
});

server.registerTool('stats', { description: 'How many calls it answered and how many were cancelled.' }, async () => ({
  content: [{ type: 'text', text: JSON.stringify({ calls, cancelled, pid: process.pid }) }],
}));

server.registerTool('readFileInfo', { description: 'A camelCase name.', annotations: { readOnlyHint: true } }, async () => ({ content: [{ type: 'text', text: 'info' }] }));

server.registerTool('grow', { description: 'Adds the tool "late" (the client hears tools/list_changed).' }, async () => {
  server.registerTool('late', { description: 'Added while connected.' }, async () => ({ content: [{ type: 'text', text: 'late answer' }] }));
  return { content: [{ type: 'text', text: 'added late' }] };
});

await server.connect(new StdioServerTransport());
