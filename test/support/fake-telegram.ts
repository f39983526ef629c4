// A small Bot API stand-in for what the emulator cannot do: scripted failures, chat actions, callback answers,
// and re-delivering an update. Records every call.
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface BotApiCall {
  method: string;
  body: Record<string, any>;
  /** When the request arrived (ms since the epoch). */
  at?: number;
  /** What a successful call answered (the message sent, the updates handed out). */
  result?: unknown;
}

export type BotApiReply = { ok: true; result: unknown } | { ok: false; error_code: number; description: string; parameters?: { retry_after?: number } };

export interface FakeTelegram {
  apiRoot: string;
  calls: BotApiCall[];
  /** Updates handed out by the next getUpdates calls (each batch once, whatever the offset). */
  pushUpdates(...updates: unknown[]): void;
  /** Updates handed out again and again, as Telegram does, until a getUpdates offset acknowledges them. */
  queueUpdates(...updates: { update_id: number }[]): void;
  /** Updates queued and not yet acknowledged. */
  unacknowledged(): number[];
  /** What downloading a file gives: its bytes, and a promise the download waits for (a slow file). */
  serveFile(fileId: string, file: { bytes?: string | Buffer; until?: Promise<unknown> }): void;
  /**
   * The next `times` calls of `method` get this reply instead of the default ('drop': the connection is closed with
   * no answer); with `after`, once that many more have been answered as usual.
   */
  failNext(method: string, reply: BotApiReply | 'drop', times?: number, after?: number): void;
  callsOf(method: string): BotApiCall[];
  close(): Promise<void>;
}

/** File uploads: fields as strings, files as { name, size }. */
function parseMultipart(raw: Buffer, type: string): Record<string, any> {
  const boundary = /boundary="?([^";]+)"?/.exec(type)?.[1];
  const body: Record<string, any> = {};
  if (!boundary) return body;
  for (const part of raw.toString('latin1').split(`--${boundary}`)) {
    const split = part.indexOf('\r\n\r\n');
    if (split < 0) continue;
    const headers = part.slice(0, split);
    const content = part.slice(split + 4).replace(/\r\n$/, '');
    const name = /name="([^"]*)"/.exec(headers)?.[1];
    if (!name) continue;
    const filename = /filename="?([^"\r\n;]*)"?/.exec(headers)?.[1];
    body[name] = filename !== undefined ? { name: filename, size: Buffer.byteLength(content, 'latin1') } : Buffer.from(content, 'latin1').toString('utf8');
  }
  // grammY sends `document: "attach://<part>"` and the file as that part.
  for (const [key, value] of Object.entries(body)) {
    if (typeof value === 'string' && value.startsWith('attach://')) body[key] = body[value.slice('attach://'.length)];
  }
  return body;
}

async function readBody(req: IncomingMessage): Promise<Record<string, any>> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const type = req.headers['content-type'] ?? '';
  if (type.startsWith('multipart/form-data')) {
    return parseMultipart(Buffer.concat(chunks), type);
  }
  const text = Buffer.concat(chunks).toString('utf8');
  if (!text) return {};
  try {
    return JSON.parse(text);
  } catch {
    return Object.fromEntries(new URLSearchParams(text));
  }
}

export interface FakeTelegramOptions {
  /** getUpdates with a `timeout` waits (up to it, at most 25 s) for updates, as Telegram's long polling does. */
  longPoll?: boolean;
  /**
   * Asked before each Bot API call is answered: a reply to give instead (a 429 with retry_after, a 5xx), or 'drop' to
   * close the connection without an answer. Not asked for getMe.
   */
  chaos?: (method: string, body: Record<string, any>) => BotApiReply | 'drop' | undefined;
}

export async function startFakeTelegram(options: FakeTelegramOptions = {}): Promise<FakeTelegram> {
  const calls: BotApiCall[] = [];
  const batches: unknown[][] = [];
  let queued: { update_id: number }[] = [];
  const files = new Map<string, { bytes?: string | Buffer; until?: Promise<unknown> }>();
  const fileBytes = (fileId: string) => Buffer.from(files.get(fileId)?.bytes ?? 'fake file bytes');
  const failures = new Map<string, (BotApiReply | 'drop' | 'as usual')[]>();
  let messageId = 100;
  // Long polls waiting for updates.
  const pollers = new Set<() => void>();
  const wakePollers = () => {
    for (const wake of pollers) wake();
    pollers.clear();
  };
  const server = createServer(async (req, res) => {
    if (req.url?.startsWith('/file/')) {
      calls.push({ method: 'file', body: { path: req.url } });
      const fileId = decodeURIComponent(/\/files\/([^/]+)\.jpg$/.exec(req.url)?.[1] ?? '');
      await files.get(fileId)?.until;
      res.writeHead(200, { 'content-type': 'application/octet-stream' });
      return res.end(fileBytes(fileId));
    }
    const method = (req.url ?? '').split('/').pop()!.split('?')[0];
    const at = Date.now();
    const body = await readBody(req);
    const call: BotApiCall = { method, body, at };
    calls.push(call);
    const next = failures.get(method)?.shift();
    const scripted = next === 'as usual' ? undefined : (next ?? (method === 'getMe' ? undefined : options.chaos?.(method, body)));
    if (scripted === 'drop') {
      call.result = 'dropped';
      return void req.socket.destroy();
    }
    if (method === 'getUpdates' && options.longPoll && !scripted && Number(body.timeout) > 0) {
      const offset = Number(body.offset ?? 0);
      if (!batches.length && !queued.some((u) => u.update_id >= offset)) {
        await new Promise<void>((resolve) => {
          const wake = () => {
            clearTimeout(timer);
            pollers.delete(wake);
            // Kept-alive sockets carry poll after poll: the listener goes with its poll.
            req.socket.off('close', wake);
            resolve();
          };
          const timer = setTimeout(wake, Math.min(Number(body.timeout), 25) * 1000);
          pollers.add(wake);
          req.socket.once('close', wake);
        });
        if (req.socket.destroyed) return;
      }
    }
    let reply: BotApiReply;
    if (scripted) reply = scripted;
    else if (method === 'getMe') reply = { ok: true, result: { id: 4242, is_bot: true, first_name: 'Parlor', username: 'parlor_test_bot' } };
    else if (method === 'getUpdates') {
      const offset = Number(body.offset ?? 0);
      queued = queued.filter((u) => u.update_id >= offset);
      reply = { ok: true, result: batches.shift() ?? queued };
    } else if (method === 'sendPhoto' || method === 'sendDocument') {
      reply = { ok: true, result: { message_id: ++messageId, date: 0, chat: { id: Number(body.chat_id), type: 'private' }, caption: body.caption } };
    } else if (method === 'sendMessage') {
      reply = { ok: true, result: { message_id: ++messageId, date: 0, chat: { id: Number(body.chat_id), type: 'private' }, text: body.text } };
    } else if (method === 'getFile') {
      reply = { ok: true, result: { file_id: body.file_id, file_unique_id: 'u', file_size: fileBytes(body.file_id).length, file_path: `files/${encodeURIComponent(body.file_id)}.jpg` } };
    } else reply = { ok: true, result: true };
    // A copy: the queue handed out keeps changing.
    if (reply.ok) call.result = Array.isArray(reply.result) ? [...reply.result] : reply.result;
    res.writeHead(reply.ok ? 200 : reply.error_code, { 'content-type': 'application/json' });
    res.end(JSON.stringify(reply));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    apiRoot: `http://127.0.0.1:${port}`,
    calls,
    pushUpdates(...updates) {
      batches.push(updates);
      wakePollers();
    },
    queueUpdates(...updates) {
      queued.push(...updates);
      wakePollers();
    },
    unacknowledged: () => queued.map((u) => u.update_id),
    serveFile: (fileId, file) => void files.set(fileId, file),
    failNext(method, reply, times = 1, after = 0) {
      failures.set(method, [...(failures.get(method) ?? []), ...Array.from({ length: after }, () => 'as usual' as const), ...Array.from({ length: times }, () => reply)]);
    },
    callsOf: (method) => calls.filter((c) => c.method === method),
    close: () =>
      new Promise<void>((resolve) => {
        wakePollers();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
