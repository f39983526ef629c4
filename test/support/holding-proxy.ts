// A pass-through in front of a Bot API stand-in that can hold a call: the request reaches nobody and is never
// answered, as when a process dies after writing its ledger row and before the platform accepted the message.
import { createServer, request as httpRequest, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface HoldingProxy {
  apiRoot: string;
  /** Holds the next `method` call whose JSON body matches; resolves with that body once it arrives. */
  holdNext(method: string, matches: (body: Record<string, any>) => boolean): Promise<Record<string, any>>;
  close(): Promise<void>;
}

interface Hold {
  method: string;
  matches: (body: Record<string, any>) => boolean;
  arrived: (body: Record<string, any>) => void;
}

async function readAll(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

export async function startHoldingProxy(target: string): Promise<HoldingProxy> {
  const upstream = new URL(target);
  const holds: Hold[] = [];
  const server = createServer(async (req, res) => {
    const raw = await readAll(req);
    const method = req.url?.split('/').pop()?.split('?')[0] ?? '';
    let body: Record<string, any> = {};
    if ((req.headers['content-type'] ?? '').includes('json')) {
      try {
        body = JSON.parse(raw.toString('utf8'));
      } catch {
        body = {};
      }
    }
    const hold = holds.findIndex((h) => h.method === method && h.matches(body));
    if (hold >= 0) {
      const [taken] = holds.splice(hold, 1);
      taken.arrived(body);
      // Never forwarded, never answered: the socket stays open until the client goes away.
      return;
    }
    const forward = httpRequest(
      { host: upstream.hostname, port: upstream.port, path: req.url, method: req.method, headers: { ...req.headers, host: upstream.host } },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    forward.on('error', () => res.writeHead(502).end());
    forward.end(raw);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    apiRoot: `http://127.0.0.1:${port}`,
    holdNext: (method, matches) => new Promise((arrived) => holds.push({ method, matches, arrived })),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
