// An MCP server over streamable HTTP on 127.0.0.1 (a random port) for the MCP client's tests. Every request must
// carry `Authorization: Bearer <token>` (else HTTP 401), and the headers of each request are recorded.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { z } from 'zod';

export interface McpHttpServer {
  url: string;
  /** Each request's method and headers, in order. */
  requests: { method: string; headers: http.IncomingHttpHeaders }[];
  close(): Promise<void>;
}

function buildServer(): McpServer {
  const server = new McpServer({ name: 'parlor-test-http', version: '1.0.0' });
  server.registerTool('weather', { description: 'The weather in a city.', inputSchema: { city: z.string() } }, async ({ city }) => ({
    content: [{ type: 'text', text: `sunny in ${city}` }],
  }));
  server.registerTool('forecast', { description: 'Tomorrow, as structured content.' }, async () => ({
    content: [],
    structuredContent: { tomorrow: 'rain' },
  }));
  server.registerTool('flood', { description: 'Answers with 12 MB of text.' }, async () => ({ content: [{ type: 'text', text: 'x'.repeat(12 * 1024 * 1024) }] }));
  return server;
}

export async function startMcpHttpServer(options: { token: string }): Promise<McpHttpServer> {
  const requests: McpHttpServer['requests'] = [];
  const httpServer = http.createServer((req, res) => {
    requests.push({ method: req.method ?? '', headers: req.headers });
    if (req.headers.authorization !== `Bearer ${options.token}`) {
      res.writeHead(401, { 'content-type': 'application/json' }).end(JSON.stringify({ error: 'missing or wrong bearer token' }));
      return;
    }
    // Stateless: a server and a transport per request, and no stream for server-initiated messages.
    if (req.method !== 'POST') {
      res.writeHead(405, { allow: 'POST' }).end();
      return;
    }
    const server = buildServer();
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    res.on('close', () => {
      void transport.close();
      void server.close();
    });
    void server.connect(transport).then(() => transport.handleRequest(req, res));
  });
  await new Promise<void>((resolve) => httpServer.listen(0, '127.0.0.1', resolve));
  const { port } = httpServer.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        httpServer.closeAllConnections();
        httpServer.close(() => resolve());
      }),
  };
}
