// The fake Discord's HTTP side: routing under /api/v10, the bot-token check, rate-limit headers on every bucketed
// answer (a bucket per route and channel, guild or webhook), scripted failures, and a record of every request.
import { createHash } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { apiError } from './fake-discord-checks.ts';

export interface DiscordCall {
  method: string;
  /** The path after /api/v10, without the query (`/channels/123/messages`). */
  path: string;
  query: Record<string, string>;
  /** JSON body, or a multipart upload's `payload_json`. */
  body: any;
  /** Multipart uploads: each file part's field (`files[0]`), file name and size in bytes. */
  files?: { field: string; name: string; size: number; contentType?: string }[];
  /** When the request arrived (ms since the epoch). */
  at: number;
  /** Whether it carried the bot's token (`Authorization: Bot <token>`). */
  authorized: boolean;
  status?: number;
  /** Whether the answer was a scripted failure. */
  scripted?: boolean;
  /** What a successful call answered. */
  result?: unknown;
}

/** An answer a test scripts for the next matching request: a status (429, 5xx, …) or a dropped connection. */
export type ScriptedFailure =
  | {
      status: number;
      /** Default: Discord's body for the status (`{ message, retry_after, global }` for a 429). */
      body?: unknown;
      /** Added to (and overriding) the headers the fake derives. */
      headers?: Record<string, string>;
      /** A 429's wait in seconds (default: the body's `retry_after`, else 0.25). */
      retryAfter?: number;
      global?: boolean;
      /** Carry the request out, then answer with the failure (a 5xx after Discord already created the message). */
      applied?: boolean;
    }
  /** A TCP reset instead of an answer: discord.js sees ECONNRESET. */
  | { reset: true; applied?: boolean }
  /** The usual answer, that much later (a slow Discord). */
  | { slowMs: number };

type StatusFailure = Extract<ScriptedFailure, { status: number }>;

export interface RestRequest {
  method: string;
  params: Record<string, string>;
  query: URLSearchParams;
  body: any;
  files: { field: string; name: string; size: number; contentType?: string; bytes: Buffer }[];
}
export type Reply = { status: number; body?: unknown; headers?: Record<string, string> };
export type RouteHandler = (req: RestRequest) => Reply | Promise<Reply>;
/** `:name` segments are parameters; `auth: false` routes (interaction callbacks, webhooks) take no bot token. */
export type Route = { method: string; pattern: string; auth?: false; handle: RouteHandler };

export const json = (status: number, body: unknown): Reply => ({ status, body });
export const noContent: Reply = { status: 204 };
export const fail = (status: number, code: number, message: string) => json(status, apiError(code, message));

/** `failNext`/`callsOf` routes: `METHOD /path` where a `:name` segment matches any one segment. */
export function routeMatches(route: string, method: string, path: string): boolean {
  const [m, p] = route.includes(' ') ? route.split(/\s+/, 2) : ['*', route];
  if (m !== '*' && m.toUpperCase() !== method) return false;
  const want = p.replace(/^\/api\/v10/, '').split('/').filter(Boolean);
  const got = path.split('/').filter(Boolean);
  return want.length === got.length && want.every((seg, i) => seg.startsWith(':') || decodeURIComponent(seg) === decodeURIComponent(got[i]));
}

export function createRest(options: { routes: Route[]; token: string; rateLimit: { limit: number; windowMs: number } }) {
  const { routes } = options;
  const calls: DiscordCall[] = [];
  const failures: { route: string; failure: ScriptedFailure }[] = [];
  const buckets = new Map<string, { count: number; resetAt: number }>();

  function rateLimitHeaders(bucketKey: string, hash: string): { headers: Record<string, string>; exceeded: boolean; resetAfter: number } {
    const now = Date.now();
    let bucket = buckets.get(bucketKey);
    if (!bucket || bucket.resetAt <= now) buckets.set(bucketKey, (bucket = { count: 0, resetAt: now + options.rateLimit.windowMs }));
    bucket.count++;
    const resetAfter = (bucket.resetAt - now) / 1000;
    const headers = {
      'x-ratelimit-limit': String(options.rateLimit.limit),
      'x-ratelimit-remaining': String(Math.max(0, options.rateLimit.limit - bucket.count)),
      'x-ratelimit-reset': (bucket.resetAt / 1000).toFixed(3),
      'x-ratelimit-reset-after': resetAfter.toFixed(3),
      'x-ratelimit-bucket': hash,
    };
    return { headers, exceeded: bucket.count > options.rateLimit.limit, resetAfter };
  }

  /** A 429 as Discord writes it: body and headers agree, `Retry-After` in whole seconds. */
  function tooManyRequests(failure: StatusFailure, hash: string): Reply {
    const given = (failure.body ?? {}) as Record<string, any>;
    const retryAfter = failure.retryAfter ?? given.retry_after ?? 0.25;
    const global = failure.global ?? given.global ?? false;
    const body = { message: 'You are being rate limited.', retry_after: retryAfter, global, ...given };
    const headers: Record<string, string> = { 'retry-after': String(Math.ceil(retryAfter)), 'x-ratelimit-scope': global ? 'global' : 'user' };
    if (global) headers['x-ratelimit-global'] = 'true';
    else
      Object.assign(headers, {
        'x-ratelimit-limit': String(options.rateLimit.limit),
        'x-ratelimit-remaining': '0',
        'x-ratelimit-reset': ((Date.now() + retryAfter * 1000) / 1000).toFixed(3),
        'x-ratelimit-reset-after': retryAfter.toFixed(3),
        'x-ratelimit-bucket': hash,
      });
    return { status: 429, body, headers: { ...headers, ...failure.headers } };
  }

  function scripted(failure: StatusFailure, hash: string): Reply {
    if (failure.status === 429) return tooManyRequests(failure, hash);
    const body = failure.body ?? (failure.status >= 500 ? { message: `${failure.status}: ${failure.status === 502 ? 'Bad Gateway' : 'Internal Server Error'}`, code: 0 } : { message: `${failure.status}: Scripted failure`, code: 0 });
    return { status: failure.status, body, headers: failure.headers };
  }

  async function handle(req: IncomingMessage, res: ServerResponse, pathname: string, query: URLSearchParams) {
    const method = req.method ?? 'GET';
    const segments = pathname.split('/').filter(Boolean).map((s) => decodeURIComponent(s));
    const { body, files } = await readBody(req);
    const authorized = req.headers.authorization === `Bot ${options.token}`;
    const call: DiscordCall = { method, path: pathname, query: Object.fromEntries(query), body, ...(files.length && { files: files.map(({ bytes: _bytes, ...f }) => f) }), at: Date.now(), authorized };
    calls.push(call);
    const send = (reply: Reply) => {
      call.status = reply.status;
      if (reply.status < 300 && reply.body !== undefined) call.result = reply.body;
      if (reply.body === undefined) {
        // 204: no body and no content type (discord.js then reads an empty buffer).
        res.writeHead(reply.status, reply.headers);
        return res.end();
      }
      const text = typeof reply.body === 'string';
      res.writeHead(reply.status, { 'content-type': text ? 'text/html' : 'application/json', ...reply.headers });
      res.end(text ? reply.body : JSON.stringify(reply.body));
    };

    let route: Route | undefined;
    let params: Record<string, string> = {};
    let pathKnown = false;
    for (const candidate of routes) {
      const match = matchPattern(candidate.pattern, segments);
      if (!match) continue;
      pathKnown = true;
      if (candidate.method === method) {
        route = candidate;
        params = match;
        break;
      }
    }
    if (!route) return send(pathKnown ? fail(405, 0, '405: Method Not Allowed') : fail(404, 0, '404: Not Found'));
    if (route.auth !== false && !authorized) return send(fail(401, 0, '401: Unauthorized'));

    const hash = createHash('sha1').update(`${method} ${route.pattern}`).digest('hex').slice(0, 16);
    const major = params.channel ?? params.guild ?? (params.token ? `${params.application ?? params.interaction}:${params.token}` : '');
    const limits = route.auth === false ? undefined : rateLimitHeaders(`${method} ${route.pattern} ${major}`, hash);
    const index = failures.findIndex((f) => routeMatches(f.route, method, pathname));
    const failure: ScriptedFailure | undefined = index >= 0 ? failures.splice(index, 1)[0].failure : limits?.exceeded ? { status: 429, retryAfter: limits.resetAfter } : undefined;
    const request: RestRequest = { method, params, query, body, files };
    if (failure && 'slowMs' in failure) await new Promise((r) => setTimeout(r, failure.slowMs));
    else if (failure) {
      if (failure.applied) await route.handle(request);
      call.scripted = true;
      // A TCP reset rather than a clean close, so the client sees ECONNRESET (which @discordjs/rest retries).
      if ('reset' in failure) return void req.socket.resetAndDestroy();
      return send(scripted(failure, hash));
    }
    const reply = await route.handle(request);
    send({ ...reply, headers: { ...limits?.headers, ...reply.headers } });
  }

  return {
    calls,
    handle,
    failNext(route: string, failure: ScriptedFailure, times = 1) {
      for (let i = 0; i < times; i++) failures.push({ route, failure });
    },
  };
}

function matchPattern(pattern: string, segments: string[]): Record<string, string> | undefined {
  const parts = pattern.split('/').filter(Boolean);
  if (parts.length !== segments.length) return undefined;
  const params: Record<string, string> = {};
  for (const [i, part] of parts.entries()) {
    if (part.startsWith(':')) {
      // `@me` and `@original` are literal segments of their own routes, not ids.
      if (segments[i] === '@me' && part !== ':message') return undefined;
      params[part.slice(1)] = segments[i];
    } else if (part !== segments[i]) return undefined;
  }
  return params;
}

async function readBody(req: IncomingMessage): Promise<{ body: any; files: RestRequest['files'] }> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const raw = Buffer.concat(chunks);
  const type = req.headers['content-type'] ?? '';
  if (type.startsWith('multipart/form-data')) {
    const form = await new Response(raw, { headers: { 'content-type': type } }).formData();
    let body: any = {};
    const files: RestRequest['files'] = [];
    for (const [field, value] of form.entries()) {
      if (typeof value === 'string') {
        if (field === 'payload_json') body = { ...body, ...JSON.parse(value) };
        else body[field] = value;
      } else {
        const bytes = Buffer.from(await value.arrayBuffer());
        files.push({ field, name: (value as { name?: string }).name ?? field, size: bytes.length, ...(value.type && { contentType: value.type }), bytes });
      }
    }
    return { body, files };
  }
  if (!raw.length) return { body: {}, files: [] };
  try {
    return { body: JSON.parse(raw.toString('utf8')), files: [] };
  } catch {
    return { body: raw.toString('utf8'), files: [] };
  }
}
