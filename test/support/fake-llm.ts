// A scriptable fake LLM HTTP server speaking the OpenAI Chat Completions and Anthropic
// Messages wire formats closely enough that the official SDKs parse its answers.
// Tests queue replies (or handlers), then inspect what the client actually sent.
//
// Malformed tool-call JSON: a string `arguments` is sent verbatim by the OpenAI format
// (both modes) and by Anthropic streaming (`partial_json`). Anthropic non-streaming has
// to send `input` as a JSON object, so unparseable strings become `{}` there.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomUUID } from 'node:crypto';
import { SUMMARY_SYSTEM_PROMPT } from '../../src/jobs/conversation-summaries.ts';

export interface FakeToolCall {
  id?: string;
  name: string;
  /** String arguments are sent verbatim (lets a test send malformed JSON). */
  arguments: string | Record<string, unknown>;
}

export interface FakeReply {
  text?: string;
  toolCalls?: FakeToolCall[];
  /** >= 400: answer with this status and an error body in the API's own shape (`text` becomes the message). */
  status?: number;
  headers?: Record<string, string>;
  delayMs?: number;
  /** `cacheRead`/`cacheWrite`: input tokens the provider says it read from / wrote to its prompt cache. */
  usage?: { input: number; output: number; cacheRead?: number; cacheWrite?: number };
  /** Never answer (until the client aborts or the server closes). */
  hang?: boolean;
  /** Destroy the socket without a response (network error). */
  destroy?: boolean;
  /** Streamed answers: the text in this many chunks (default 3), this long apart (OpenAI format). */
  chunks?: number;
  chunkDelayMs?: number;
  /** Streamed answers: start the stream, send one piece of text, then a line that is not JSON, and end it. */
  malformed?: boolean;
  /** Streamed answers: start the stream, send one piece of text, then nothing more (a provider that stalls). */
  stall?: boolean;
  /** Streamed answers: start the stream, send one piece of text, then end the response cleanly (a cut-off stream). */
  cut?: boolean;
}

export interface RecordedRequest {
  api: 'openai' | 'anthropic';
  path: string;
  headers: Record<string, string | string[] | undefined>;
  body: any;
  stream: boolean;
  model: string;
  system: string;
  lastUserText: string;
  toolNames: string[];
  toolChoice: unknown;
}

export type FakeHandler = (req: RecordedRequest) => FakeReply | Promise<FakeReply>;

export interface FakeLlm {
  origin: string;
  openaiBaseUrl: string;
  anthropicBaseUrl: string;
  requests: RecordedRequest[];
  /**
   * The conversation-summary job's requests: answered by `setSummaries`' handler (a short canned summary by
   * default), never from the script, and kept apart from `requests`, so that a summary running in the background at
   * any moment takes no test's scripted reply and counts in no test's requests.
   */
  summaries: RecordedRequest[];
  script(...replies: Array<FakeReply | FakeHandler>): void;
  setDefault(handler: FakeHandler): void;
  setSummaries(handler: FakeHandler): void;
  waitForRequests(n: number, timeoutMs?: number): Promise<RecordedRequest[]>;
  reset(): void;
  close(): Promise<void>;
}

type Api = RecordedRequest['api'];
interface Call { id: string; name: string; args: string }
interface Usage { input: number; output: number; cacheRead?: number; cacheWrite?: number }

const echo: FakeHandler = (req) => ({ text: `echo: ${req.lastUserText}` });
const cannedSummary: FakeHandler = (req) => ({ text: `Summary of ${req.body?.messages?.length ?? 0} messages.` });
const rid = (prefix: string) => prefix + randomUUID().replace(/-/g, '').slice(0, 24);
// Any non-zero number will do; ~4 chars per token keeps it plausible.
const rough = (s: string) => Math.max(1, Math.ceil(s.length / 4));

/** Split into up to n non-empty pieces so clients really have to accumulate deltas. */
function pieces(s: string, n: number): string[] {
  const size = Math.max(1, Math.ceil(s.length / n));
  const out: string[] = [];
  for (let i = 0; i < s.length; i += size) out.push(s.slice(i, i + size));
  return out;
}

/** String content, or the `text` parts/blocks of an array content joined. */
function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content
    .filter((b) => b?.type === 'text' && typeof b.text === 'string')
    .map((b) => b.text as string)
    .join('\n');
}

function record(api: Api, path: string, headers: IncomingMessage['headers'], body: any): RecordedRequest {
  const messages: any[] = Array.isArray(body?.messages) ? body.messages : [];
  let system: string;
  let users: any[];
  if (api === 'openai') {
    // 'developer' is OpenAI's newer name for the system role.
    system = messages.filter((m) => m?.role === 'system' || m?.role === 'developer').map((m) => textOf(m.content)).join('\n');
    users = messages.filter((m) => m?.role === 'user');
  } else {
    system = textOf(body?.system);
    // A user turn holding only tool_result blocks is the Anthropic twin of OpenAI's 'tool'
    // message, so skip it too: lastUserText means the same thing for both APIs.
    users = messages.filter((m) => m?.role === 'user' &&
      (typeof m.content === 'string' || (Array.isArray(m.content) && m.content.some((b: any) => b?.type === 'text'))));
  }
  const tools: any[] = Array.isArray(body?.tools) ? body.tools : [];
  return {
    api, path, headers: { ...headers }, body,
    stream: body?.stream === true,
    model: typeof body?.model === 'string' ? body.model : '',
    system,
    lastUserText: users.length ? textOf(users[users.length - 1].content) : '',
    toolNames: tools.map((t) => t?.function?.name ?? t?.custom?.name ?? t?.name).filter((n): n is string => typeof n === 'string'),
    toolChoice: body?.tool_choice,
  };
}

function sendJson(res: ServerResponse, status: number, obj: unknown, headers: Record<string, string> = {}): void {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify(obj));
}

// Error bodies mirror what each vendor really returns, so SDK error classes and
// `err.error` look the same as in production.
const ANTHROPIC_ERR: Record<number, string> = {
  400: 'invalid_request_error', 401: 'authentication_error', 403: 'permission_error',
  404: 'not_found_error', 413: 'request_too_large', 429: 'rate_limit_error', 529: 'overloaded_error',
};
function sendError(res: ServerResponse, api: Api, status: number, message: string, headers: Record<string, string> = {}): void {
  if (api === 'anthropic') {
    const type = ANTHROPIC_ERR[status] ?? (status >= 500 ? 'api_error' : 'invalid_request_error');
    return sendJson(res, status, { type: 'error', error: { type, message }, request_id: rid('req_') }, headers);
  }
  const [type, code] = status === 429 ? ['requests', 'rate_limit_exceeded']
    : status >= 500 ? ['server_error', null]
    : ['invalid_request_error', status === 401 ? 'invalid_api_key' : null];
  sendJson(res, status, { error: { message, type, param: null, code } }, headers);
}

function startSse(res: ServerResponse, headers: Record<string, string> = {}): void {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', ...headers });
}
function sse(res: ServerResponse, event: string | undefined, data: unknown): void {
  res.write(`${event ? `event: ${event}\n` : ''}data: ${JSON.stringify(data)}\n\n`);
}

async function openaiReply(res: ServerResponse, rec: RecordedRequest, reply: FakeReply, calls: Call[], usage: Usage): Promise<void> {
  const id = rid('chatcmpl-');
  const created = Math.floor(Date.now() / 1000);
  const model = rec.model || 'fake-model';
  const finish = calls.length ? 'tool_calls' : 'stop';
  const u = {
    prompt_tokens: usage.input, completion_tokens: usage.output, total_tokens: usage.input + usage.output,
    ...(usage.cacheRead !== undefined ? { prompt_tokens_details: { cached_tokens: usage.cacheRead } } : {}),
  };
  const content = reply.text ?? (calls.length ? null : '');
  if (!rec.stream) {
    const message: Record<string, unknown> = { role: 'assistant', content, refusal: null };
    if (calls.length) message.tool_calls = calls.map((c) => ({ id: c.id, type: 'function', function: { name: c.name, arguments: c.args } }));
    return sendJson(res, 200, {
      id, object: 'chat.completion', created, model,
      choices: [{ index: 0, message, logprobs: null, finish_reason: finish }], usage: u,
    }, reply.headers);
  }
  // With include_usage the real API sends `usage: null` on every chunk, then a usage-only chunk.
  const withUsage = rec.body?.stream_options?.include_usage === true;
  const chunk = (delta: object, finish_reason: string | null = null) => sse(res, undefined, {
    id, object: 'chat.completion.chunk', created, model,
    choices: [{ index: 0, delta, logprobs: null, finish_reason }], ...(withUsage ? { usage: null } : {}),
  });
  startSse(res, reply.headers);
  chunk({ role: 'assistant', content: content === null ? null : '' });
  for (const p of pieces(reply.text ?? '', reply.chunks ?? 3)) {
    chunk({ content: p });
    if (reply.chunkDelayMs) await new Promise((r) => setTimeout(r, reply.chunkDelayMs));
  }
  calls.forEach((c, index) => {
    chunk({ tool_calls: [{ index, id: c.id, type: 'function', function: { name: c.name, arguments: '' } }] });
    for (const p of pieces(c.args, 2)) chunk({ tool_calls: [{ index, function: { arguments: p } }] });
  });
  chunk({}, finish);
  if (withUsage) sse(res, undefined, { id, object: 'chat.completion.chunk', created, model, choices: [], usage: u });
  res.end('data: [DONE]\n\n');
}

function anthropicReply(res: ServerResponse, rec: RecordedRequest, reply: FakeReply, calls: Call[], usage: Usage): void {
  const id = rid('msg_');
  const model = rec.model || 'fake-model';
  const stop_reason = calls.length ? 'tool_use' : 'end_turn';
  // A tool-only turn has no text block; an empty reply still has one (as the real API does).
  const withText = !!reply.text || !calls.length;
  // Anthropic's input_tokens leaves out what was read from or written to the cache.
  const cache = {
    ...(usage.cacheRead !== undefined ? { cache_read_input_tokens: usage.cacheRead } : {}),
    ...(usage.cacheWrite !== undefined ? { cache_creation_input_tokens: usage.cacheWrite } : {}),
  };
  const input = usage.input - (usage.cacheRead ?? 0) - (usage.cacheWrite ?? 0);
  if (!rec.stream) {
    const content: object[] = withText ? [{ type: 'text', text: reply.text ?? '' }] : [];
    for (const c of calls) {
      let input: unknown = {};
      try { input = JSON.parse(c.args); } catch { /* malformed: see header comment */ }
      content.push({ type: 'tool_use', id: c.id, name: c.name, input });
    }
    return sendJson(res, 200, {
      id, type: 'message', role: 'assistant', model, content, stop_reason, stop_sequence: null,
      usage: { input_tokens: input, output_tokens: usage.output, ...cache },
    }, reply.headers);
  }
  startSse(res, reply.headers);
  sse(res, 'message_start', { type: 'message_start', message: {
    id, type: 'message', role: 'assistant', model, content: [], stop_reason: null, stop_sequence: null,
    usage: { input_tokens: input, output_tokens: 1, ...cache },
  } });
  sse(res, 'ping', { type: 'ping' }); // the real API sends one; SDKs must skip it
  let index = 0;
  if (withText) {
    sse(res, 'content_block_start', { type: 'content_block_start', index, content_block: { type: 'text', text: '' } });
    for (const text of pieces(reply.text ?? '', 3)) sse(res, 'content_block_delta', { type: 'content_block_delta', index, delta: { type: 'text_delta', text } });
    sse(res, 'content_block_stop', { type: 'content_block_stop', index: index++ });
  }
  for (const c of calls) {
    sse(res, 'content_block_start', { type: 'content_block_start', index, content_block: { type: 'tool_use', id: c.id, name: c.name, input: {} } });
    for (const partial_json of pieces(c.args, 2)) sse(res, 'content_block_delta', { type: 'content_block_delta', index, delta: { type: 'input_json_delta', partial_json } });
    sse(res, 'content_block_stop', { type: 'content_block_stop', index: index++ });
  }
  sse(res, 'message_delta', { type: 'message_delta', delta: { stop_reason, stop_sequence: null }, usage: { output_tokens: usage.output } });
  sse(res, 'message_stop', { type: 'message_stop' });
  res.end();
}

// One list both SDKs accept: OpenAI reads {object,data[].id}; Anthropic's page reads data/has_more/ids.
const MODELS = {
  object: 'list', has_more: false, first_id: 'fake-model', last_id: 'fake-model',
  data: [{ id: 'fake-model', object: 'model', type: 'model', created: 0, owned_by: 'parlor', display_name: 'Fake Model', created_at: '2024-01-01T00:00:00Z' }],
};

export async function startFakeLlm(): Promise<FakeLlm> {
  const requests: RecordedRequest[] = [];
  const summaries: RecordedRequest[] = [];
  let summarise: FakeHandler = cannedSummary;
  const queue: Array<FakeReply | FakeHandler> = [];
  const waiters = new Set<{ n: number; done: (r: RecordedRequest[]) => void }>();
  const timers = new Set<NodeJS.Timeout>();
  let fallback: FakeHandler = echo;
  let closed = false;

  const notify = () => {
    for (const w of waiters) if (requests.length >= w.n) { waiters.delete(w); w.done(requests.slice()); }
  };
  // Tracked so close() can cancel pending delays instead of answering into a dead server.
  const sleep = (ms: number) => new Promise<void>((resolve) => {
    const t = setTimeout(() => { timers.delete(t); resolve(); }, ms);
    timers.add(t);
  });

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? '/').split('?')[0];
    if (req.method === 'GET' && /^(\/v1)?\/models$/.test(path)) return sendJson(res, 200, MODELS);
    const api: Api | undefined = /^(\/v1)?\/chat\/completions$/.test(path) ? 'openai'
      : /^(\/v1)?\/messages$/.test(path) ? 'anthropic' : undefined;
    if (req.method !== 'POST' || !api) return sendError(res, api ?? 'openai', 404, `fake-llm: no route for ${req.method} ${path}`);

    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    let body: any;
    try { body = JSON.parse(Buffer.concat(chunks).toString('utf8')); } catch {
      return sendError(res, api, 400, 'fake-llm: request body is not valid JSON');
    }
    const rec = record(api, path, req.headers, body);
    const isSummary = rec.system === SUMMARY_SYSTEM_PROMPT;
    if (isSummary) summaries.push(rec);
    else {
      requests.push(rec);
      notify();
    }

    const entry = isSummary ? summarise : (queue.shift() ?? fallback);
    let reply: FakeReply;
    try { reply = typeof entry === 'function' ? await entry(rec) : entry; } catch (e) {
      // Surface handler bugs to the client instead of leaving the request hanging.
      return sendError(res, api, 500, `fake-llm handler threw: ${e instanceof Error ? e.message : String(e)}`);
    }
    if (reply.delayMs) await sleep(reply.delayMs);
    if (closed || res.destroyed) return; // client aborted or server closed while we waited
    if (reply.destroy) return void req.socket.destroy();
    if (reply.hang) return; // socket stays open until the client aborts or close() runs
    if ((reply.malformed || reply.stall || reply.cut) && rec.stream) {
      startSse(res, reply.headers);
      const piece = api === 'openai'
        ? { id: rid('chatcmpl-'), object: 'chat.completion.chunk', created: 0, model: rec.model, choices: [{ index: 0, delta: { role: 'assistant', content: 'Par' }, finish_reason: null }] }
        : { type: 'message_start', message: { id: rid('msg_'), type: 'message', role: 'assistant', model: rec.model, content: [], stop_reason: null, usage: { input_tokens: 1, output_tokens: 0 } } };
      sse(res, api === 'anthropic' ? 'message_start' : undefined, piece);
      if (reply.stall) return; // the socket stays open until the client aborts or close() runs
      if (reply.cut) return void res.end();
      return void res.end('data: {"id": "chatcmpl-broken", "choices": [{"delta": {"content": "tial\n\n');
    }
    if (reply.status !== undefined && reply.status >= 400) {
      return sendError(res, api, reply.status, reply.text ?? `fake-llm scripted ${reply.status}`, reply.headers);
    }
    const calls = (reply.toolCalls ?? []).map((c): Call => ({
      id: c.id ?? rid(api === 'openai' ? 'call_' : 'toolu_'),
      name: c.name,
      args: typeof c.arguments === 'string' ? c.arguments : JSON.stringify(c.arguments),
    }));
    const usage = reply.usage ?? {
      input: rough(JSON.stringify(body?.messages ?? []) + rec.system),
      output: rough((reply.text ?? '') + calls.map((c) => c.name + c.args).join('')),
    };
    await (api === 'openai' ? openaiReply : anthropicReply)(res, rec, reply, calls, usage);
  }

  const server = createServer((req, res) => {
    res.on('error', () => {}); // client went away mid-write; nothing useful to do
    handle(req, res).catch((e) => {
      if (!res.headersSent && !res.destroyed) sendJson(res, 500, { error: { message: `fake-llm: ${String(e)}` } });
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  return {
    origin,
    openaiBaseUrl: `${origin}/v1`,
    anthropicBaseUrl: origin,
    requests,
    summaries,
    script: (...replies) => { queue.push(...replies); },
    setDefault: (handler) => { fallback = handler; },
    setSummaries: (handler) => { summarise = handler; },
    waitForRequests(n, timeoutMs = 5000) {
      if (requests.length >= n) return Promise.resolve(requests.slice());
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          waiters.delete(w);
          const seen = requests.map((r) => `${r.api} ${JSON.stringify(r.lastUserText)}`).join(', ') || 'none';
          reject(new Error(`fake-llm: timed out after ${timeoutMs}ms waiting for ${n} request(s); got ${requests.length} (${seen})`));
        }, timeoutMs);
        const w = { n, done: (r: RecordedRequest[]) => { clearTimeout(timer); resolve(r); } };
        waiters.add(w);
      });
    },
    reset() {
      queue.length = 0;
      requests.length = 0; // in place, so callers holding `fake.requests` see the reset
      summaries.length = 0;
      fallback = echo;
      summarise = cannedSummary;
    },
    async close() {
      if (closed) return;
      closed = true;
      for (const t of timers) clearTimeout(t);
      timers.clear();
      const done = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections(); // includes hanging requests, which server.close() alone would wait on forever
      await done;
    },
  };
}

/** The text of the last tool result a request carries (OpenAI wire format), for checking what a tool answered. */
export function lastToolResult(req: RecordedRequest): string {
  return String((req.body.messages as { role: string; content: unknown }[]).findLast((m) => m.role === 'tool')?.content);
}
