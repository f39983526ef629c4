import { serve, type ServerType } from '@hono/node-server';
import { Hono } from 'hono';
import type { Logger } from 'pino';

export interface HttpServer {
  port: number;
  close(): Promise<void>;
}

/** Parlor's one HTTP app: health here; webhooks and the remote-method API are mounted before it listens. */
export function createHttpApp(health: () => Promise<Record<string, unknown>>): Hono {
  const app = new Hono();
  app.get('/healthz', async (c) => {
    try {
      return c.json({ status: 'ok', ...(await health()) });
    } catch (err) {
      return c.json({ status: 'error', error: err instanceof Error ? err.message : String(err) }, 503);
    }
  });
  return app;
}

export async function listen(app: Hono, options: { host: string; port: number; log: Logger }): Promise<HttpServer> {
  const server = await new Promise<ServerType>((resolve, reject) => {
    const s = serve({ fetch: app.fetch, hostname: options.host, port: options.port }, () => resolve(s));
    s.once('error', reject);
  });
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : options.port;
  options.log.info({ host: options.host, port }, 'HTTP server listening');
  return {
    port,
    close: () =>
      new Promise<void>((resolve) => {
        (server as unknown as { closeAllConnections?: () => void }).closeAllConnections?.();
        server.close(() => resolve());
      }),
  };
}
