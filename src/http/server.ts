import { serve, type ServerType } from '@hono/node-server';
import { Hono } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import type { Logger } from 'pino';

/**
 * The largest request body any route takes (an API answer, a webhook update: a few KB). A larger one is answered
 * 413 from its Content-Length alone, or as soon as a body without one passes the limit, and the rest is not read.
 */
export const MAX_BODY_BYTES = 1024 * 1024;

export interface HttpServer {
  port: number;
  close(): Promise<void>;
}

/** Parlor's one HTTP app: health here; webhooks and the remote-method API are mounted before it listens. */
export function createHttpApp(health: () => Promise<Record<string, unknown>>): Hono {
  const app = new Hono();
  app.use(
    '*',
    bodyLimit({
      maxSize: MAX_BODY_BYTES,
      onError: (c) => {
        // The client may still be sending: closing the connection stops it, where keeping it would mean reading it all.
        c.header('Connection', 'close');
        return c.json({ error: 'body_too_large', message: `request bodies are limited to ${MAX_BODY_BYTES} bytes` }, 413);
      },
    }),
  );
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
