import { serve, type ServerType } from '@hono/node-server';
import { Hono, type Context } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import type { Logger } from 'pino';
import { ConfigError } from '#src/config/errors.ts';

/**
 * The largest request body any route takes (an API answer, a webhook update: a few KB). A larger one is answered
 * 413 from its Content-Length alone, or as soon as a body without one passes the limit, and the rest is not read.
 */
export const MAX_BODY_BYTES = 1024 * 1024;

export interface HttpServer {
  port: number;
  close(): Promise<void>;
}

/**
 * Parlor's one HTTP app: health here; webhooks and the remote-method API are mounted before it listens. `health`
 * says whether all is well (200) or not (503, with `status: "degraded"` and the fields saying why).
 */
export function createHttpApp(health: () => Promise<{ healthy: boolean; [field: string]: unknown }>): Hono {
  const app = new Hono();
  const tooLarge = (c: Context) => {
    // The client may still be sending: closing the connection stops it, where keeping it would mean reading it all.
    c.header('Connection', 'close');
    return c.json({ error: 'body_too_large', message: `request bodies are limited to ${MAX_BODY_BYTES} bytes` }, 413);
  };
  const counted = bodyLimit({ maxSize: MAX_BODY_BYTES, onError: tooLarge });
  app.use('*', (c, next) => {
    // A body that says its length is judged by it, and the request is not touched: asking a request of
    // @hono/node-server for its body stream makes a whole web Request of it, which costs more than the webhook it
    // carries. Only a body sent without a length (chunked) is counted as it is read.
    if (c.req.header('transfer-encoding') !== undefined) return counted(c, next);
    return Number(c.req.header('content-length') ?? 0) > MAX_BODY_BYTES ? Promise.resolve(tooLarge(c)) : next();
  });
  app.get('/healthz', async (c) => {
    try {
      const { healthy, ...fields } = await health();
      return c.json({ status: healthy ? 'ok' : 'degraded', ...fields }, healthy ? 200 : 503);
    } catch (err) {
      return c.json({ status: 'error', error: err instanceof Error ? err.message : String(err) }, 503);
    }
  });
  return app;
}

export async function listen(app: Hono, options: { host: string; port: number; log: Logger }): Promise<HttpServer> {
  const server = await new Promise<ServerType>((resolve, reject) => {
    const s = serve({ fetch: app.fetch, hostname: options.host, port: options.port }, () => resolve(s));
    s.once('error', (err: NodeJS.ErrnoException) => {
      if (err.code === 'EADDRINUSE' || err.code === 'EACCES' || err.code === 'EADDRNOTAVAIL') {
        void portProblem(err.code, options.host, options.port).then((message) => reject(new ConfigError(message)), reject);
      } else reject(err);
    });
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

/** What to do when the HTTP server cannot listen, in one line; says so when another Parlor holds the port. */
async function portProblem(code: string, host: string, port: number): Promise<string> {
  const where = `${host}:${port}`;
  if (code === 'EACCES') return `PARLOR_HTTP_PORT=${port}: this user may not listen on ${where} (ports below 1024 need root); pick a port above 1024`;
  if (code === 'EADDRNOTAVAIL') return `PARLOR_HTTP_HOST=${host} is not an address of this machine; use 127.0.0.1, 0.0.0.0 or one of its own addresses`;
  let parlor = false;
  try {
    const response = await fetch(`http://${host.includes(':') ? `[${host}]` : host}:${port}/healthz`, { signal: AbortSignal.timeout(1500) });
    const body = (await response.json().catch(() => ({}))) as { personas?: unknown };
    parlor = Array.isArray(body.personas);
  } catch {
    parlor = false;
  }
  return parlor
    ? `another Parlor is already running on ${where} (PARLOR_HTTP_PORT); to add this process as a worker beside it, run parlor start --role worker, or set PARLOR_HTTP_PORT to a free port`
    : `PARLOR_HTTP_PORT=${port}: ${where} is already in use by another program; set PARLOR_HTTP_PORT to a free port (0 picks one)`;
}
