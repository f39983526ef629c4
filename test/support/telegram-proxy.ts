// A pass-through in front of the Bot API emulator that records the calls it does not keep (answerCallbackQuery).
import { createServer, request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface RecordedCall {
  method: string;
  body: Record<string, any>;
  at: number;
}

export interface TelegramProxy {
  apiRoot: string;
  calls: RecordedCall[];
  callsOf(method: string): RecordedCall[];
  close(): Promise<void>;
}

export async function startTelegramProxy(target: string): Promise<TelegramProxy> {
  const calls: RecordedCall[] = [];
  const upstream = new URL(target);
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks);
      const method = req.url?.split('/').pop()?.split('?')[0] ?? '';
      if ((req.headers['content-type'] ?? '').includes('json')) {
        try {
          calls.push({ method, body: JSON.parse(raw.toString('utf8')), at: Date.now() });
        } catch {
          calls.push({ method, body: {}, at: Date.now() });
        }
      } else {
        calls.push({ method, body: {}, at: Date.now() });
      }
      const forward = httpRequest(
        { host: upstream.hostname, port: upstream.port, path: req.url, method: req.method, headers: { ...req.headers, host: upstream.host } },
        (answer) => {
          res.writeHead(answer.statusCode ?? 502, answer.headers);
          answer.pipe(res);
        },
      );
      forward.on('error', () => {
        res.writeHead(502).end();
      });
      forward.end(raw);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    apiRoot: `http://127.0.0.1:${port}`,
    calls,
    callsOf: (method) => calls.filter((c) => c.method === method),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
