// A web server on loopback for the web tool tests: routes by path, and a record of every path asked for.
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export type Route = (req: http.IncomingMessage, res: http.ServerResponse) => void;

export interface TestWebServer {
  port: number;
  /** Paths requested, in order (with the query). */
  requests: string[];
  /** Headers of the last request. */
  lastHeaders: () => http.IncomingHttpHeaders | undefined;
  route(path: string, handler: Route): void;
  close(): Promise<void>;
}

export async function startWebServer(): Promise<TestWebServer> {
  const routes = new Map<string, Route>();
  const requests: string[] = [];
  let lastHeaders: http.IncomingHttpHeaders | undefined;
  const server = http.createServer((req, res) => {
    requests.push(req.url ?? '');
    lastHeaders = req.headers;
    const handler = routes.get((req.url ?? '').split('?')[0]);
    if (handler) return handler(req, res);
    res.writeHead(404, { 'content-type': 'text/plain' }).end('no such route');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    requests,
    lastHeaders: () => lastHeaders,
    route: (path, handler) => routes.set(path, handler),
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** A route answering with a fixed body and content type. */
export function respond(body: string | Buffer, contentType: string, status = 200, headers: http.OutgoingHttpHeaders = {}): Route {
  return (_req, res) => {
    res.writeHead(status, { 'content-type': contentType, ...headers }).end(body);
  };
}
