// The remote-method HTTP API end to end: a real turn runs a tool that asks a person (ctx.remoteMethod), and the
// question is answered through the API, a button click, or not at all.
import http from 'node:http';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { parseSettings } from '../../src/config/env.ts';
import { MAX_EVENT_STREAMS } from '../../src/http/remote-methods.ts';
import { MAX_BODY_BYTES } from '../../src/http/server.ts';
import type { QuestionView } from '../../src/questions/service.ts';
import type { Tool } from '../../src/tools/types.ts';
import type { RecordedRequest } from '../support/fake-llm.ts';
import { startHarness, TEST_PERSONA, type Harness } from '../support/harness.ts';
import { createRecordingConnector, type RecordingConnector } from '../support/recording-connector.ts';

const TOKEN = 'test-api-token-0123456789';
const CONVERSATION = 'testy:chat:u1';

let h: Harness;
let chat: RecordingConnector;
let base: string;

/** Holds back messages with buttons (the question) this long: a slow platform. */
let questionSendDelayMs = 0;

const pickColor: Tool<{ timeout_ms?: number; choices?: string[] }> = {
  name: 'pick_color',
  description: 'Asks a person to pick a color.',
  parameters: {
    type: 'object',
    additionalProperties: false,
    properties: { timeout_ms: { type: 'number' }, choices: { type: 'array', items: { type: 'string' } } },
  },
  timeoutMs: 20_000,
  async run(args, ctx) {
    try {
      const v = await ctx.remoteMethod({
        method: 'pick_color',
        data: { palette: 'warm' },
        choices: args.choices ?? ['red', 'orange'],
        timeoutMs: args.timeout_ms ?? 5000,
      });
      return `picked ${String(v)}`;
    } catch (err) {
      return `timeout: ${(err as Error).name}: ${(err as Error).message}`;
    }
  },
};

beforeAll(async () => {
  chat = createRecordingConnector('chat', { buttons: true });
  const slowable: RecordingConnector = {
    ...chat,
    async send(message) {
      if (message.buttons && questionSendDelayMs) await new Promise((r) => setTimeout(r, questionSendDelayMs));
      return chat.send(message);
    },
  };
  h = await startHarness({
    // The default test persona, with Ana as its only approver (approvers default to all users): Bo is a user who
    // may talk to it but may not answer a question someone else was asked.
    personas: { testy: { ...TEST_PERSONA, connectors: { ...(TEST_PERSONA.connectors as object), approvers: ['chat:u1'] } } },
    app: { http: true, tools: [pickColor], connectors: () => [slowable], questionSweepMs: 200 },
    env: { PARLOR_API_TOKEN: TOKEN },
  });
  base = `http://127.0.0.1:${h.app.http!.port}`;
});

afterAll(async () => {
  await h?.stop();
});

beforeEach(async () => {
  // Every test starts from a quiet conversation with nothing pending.
  await h.app.waitForIdle(CONVERSATION, 10_000);
  h.fake.reset();
  chat.sent.length = 0;
  chat.edits.length = 0;
  questionSendDelayMs = 0;
});

async function waitFor<T>(what: string, probe: () => T | undefined | false | Promise<T | undefined | false>, timeoutMs = 5000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

function api(path: string, init: RequestInit & { token?: string | null } = {}) {
  const { token = TOKEN, ...rest } = init;
  const headers = new Headers(rest.headers);
  if (token !== null) headers.set('authorization', `Bearer ${token}`);
  return fetch(`${base}${path}`, { ...rest, headers });
}

function answer(id: string, result: unknown, token: string | null = TOKEN) {
  return api(`/remote-methods/${id}/result`, { method: 'POST', token, headers: { 'content-type': 'application/json' }, body: JSON.stringify({ result }) });
}

async function pending(): Promise<QuestionView[]> {
  const res = await api('/remote-methods/pending');
  expect(res.status).toBe(200);
  return ((await res.json()) as { methods: QuestionView[] }).methods;
}

function toolResult(req: RecordedRequest): string {
  const messages = req.body.messages as { role: string; content: string }[];
  return messages.findLast((m) => m.role === 'tool')?.content ?? '(no tool result)';
}

/** Ana asks; the model calls pick_color, then reports what the tool returned. Resolves with the open question. */
async function startPicking(args: { timeout_ms?: number; choices?: string[] } = {}): Promise<QuestionView> {
  h.fake.script({ toolCalls: [{ name: 'pick_color', arguments: args }] }, (req) => ({ text: `final: ${toolResult(req)}` }));
  await chat.inject({ text: 'pick a color for me', chat: { id: 'u1', type: 'dm' }, sender: { id: 'u1', name: 'Ana' } });
  const [question] = await waitFor('a pending remote method', async () => {
    const open = (await pending()).filter((q) => q.conversationId === CONVERSATION);
    return open.length ? open : undefined;
  });
  return question;
}

interface SseEvent {
  event: string;
  id?: string;
  data: QuestionView;
}

/** A server-sent event client on fetch: parses `event:`/`id:`/`data:` blocks as they arrive. */
async function openStream() {
  const controller = new AbortController();
  const res = await api('/remote-methods', { signal: controller.signal });
  expect(res.status).toBe(200);
  return readStream(res, controller);
}

/** Reads the events of a stream `res` opened with `controller`'s signal. */
function readStream(res: Response, controller: AbortController) {
  expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
  const events: SseEvent[] = [];
  const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  const pump = (async () => {
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return;
        buffer += value.replace(/\r\n/g, '\n');
        for (let cut = buffer.indexOf('\n\n'); cut >= 0; cut = buffer.indexOf('\n\n')) {
          const block = buffer.slice(0, cut);
          buffer = buffer.slice(cut + 2);
          let event = 'message';
          let id: string | undefined;
          const data: string[] = [];
          for (const line of block.split('\n')) {
            if (line.startsWith(':')) continue;
            const colon = line.indexOf(':');
            const field = colon < 0 ? line : line.slice(0, colon);
            const text = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
            if (field === 'event') event = text;
            else if (field === 'id') id = text;
            else if (field === 'data') data.push(text);
          }
          if (data.length) events.push({ event, id, data: JSON.parse(data.join('\n')) as QuestionView });
        }
      }
    } catch {
      // Aborted by close().
    }
  })();
  return {
    events,
    next(predicate: (e: SseEvent) => boolean, timeoutMs = 5000): Promise<SseEvent> {
      return waitFor(`an SSE event; got ${JSON.stringify(events.map((e) => `${e.event} ${e.data.status}`))}`, () => events.find(predicate), timeoutMs);
    },
    async close() {
      controller.abort();
      await pump;
    },
  };
}

describe('remote-method API: authentication', () => {
  const routes = [
    { method: 'GET', path: '/remote-methods' },
    { method: 'GET', path: '/remote-methods/pending' },
    { method: 'POST', path: '/remote-methods/abc123/result' },
  ] as const;

  it.each(routes)('$method $path is 401 without Authorization and with a wrong token', async ({ method, path }) => {
    const body = method === 'POST' ? JSON.stringify({ result: 'red' }) : undefined;
    const headers = method === 'POST' ? { 'content-type': 'application/json' } : undefined;
    const without = await api(path, { method, body, headers, token: null });
    expect(without.status).toBe(401);
    const wrong = await api(path, { method, body, headers, token: 'not-the-secret' });
    expect(wrong.status).toBe(401);
    // A prefix of the token is not the token.
    const prefix = await api(path, { method, body, headers, token: TOKEN.slice(0, 3) });
    expect(prefix.status).toBe(401);
  });

  it('the right token gets through', async () => {
    expect((await api('/remote-methods/pending')).status).toBe(200);
    const res = await answer('no-such-question', 'red');
    expect(res.status).toBe(409);
    expect(await res.json()).toMatchObject({ error: 'not_found' });
  });

  it('is off (404) when PARLOR_API_TOKEN is unset, while the HTTP server itself runs', async () => {
    const settings = parseSettings({
      DATABASE_URL: h.db.url,
      LLM_BASE_URL: h.fake.openaiBaseUrl,
      LLM_MODEL: 'fake-model',
      PARLOR_PERSONAS_DIR: h.personasDir,
      PARLOR_HTTP_PORT: '0',
    });
    expect(settings.http.apiToken).toBeUndefined();
    const peer = await h.startPeer({ settings, http: true, worker: false });
    const peerBase = `http://127.0.0.1:${peer.http!.port}`;
    expect((await fetch(`${peerBase}/healthz`)).status).toBe(200);
    for (const auth of [undefined, `Bearer ${TOKEN}`]) {
      const headers = auth ? { authorization: auth } : undefined;
      expect((await fetch(`${peerBase}/remote-methods`, { headers })).status).toBe(404);
      expect((await fetch(`${peerBase}/remote-methods/pending`, { headers })).status).toBe(404);
      const post = await fetch(`${peerBase}/remote-methods/abc/result`, { method: 'POST', headers: { ...headers, 'content-type': 'application/json' }, body: '{"result":"red"}' });
      expect(post.status).toBe(404);
    }
  });
});

describe('remote-method API: a tool waiting on a person', () => {
  it('lists the pending method, replays it on SSE connect, takes one answer, and the tool receives it', async () => {
    const question = await startPicking();
    expect(question).toMatchObject({
      kind: 'remote',
      method: 'pick_color',
      data: { palette: 'warm' },
      text: '❓ pick_color\npalette: "warm"',
      persona: 'testy',
      conversationId: CONVERSATION,
      chat: { connector: 'chat', chat: 'u1' },
      status: 'pending',
      choices: [
        { id: '1', label: 'red', value: 'red' },
        { id: '2', label: 'orange', value: 'orange' },
      ],
    });
    expect(Date.parse(question.expiresAt) - Date.parse(question.createdAt)).toBeGreaterThan(4000);

    // Connected after the method was asked: it is replayed.
    const stream = await openStream();
    try {
      const replayed = await stream.next((e) => e.event === 'method.pending');
      expect(replayed.id).toBe(question.id);
      expect(replayed.data).toMatchObject({ id: question.id, method: 'pick_color', status: 'pending', choices: question.choices });

      // Not one of the choices: refused, and it stays open.
      const invalid = await answer(question.id, 'blue');
      expect(invalid.status).toBe(400);
      expect(await invalid.json()).toMatchObject({ error: 'invalid_result', message: 'result must be one of: "red", "orange"' });
      const badJson = await api(`/remote-methods/${question.id}/result`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{not json' });
      expect(badJson.status).toBe(400);
      expect(await badJson.json()).toMatchObject({ error: 'invalid_body' });
      const noResult = await api(`/remote-methods/${question.id}/result`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"value":"red"}' });
      expect(noResult.status).toBe(400);
      expect((await pending()).map((q) => [q.id, q.status])).toEqual([[question.id, 'pending']]);

      const ok = await answer(question.id, 'orange');
      expect(ok.status).toBe(200);
      expect(await ok.json()).toMatchObject({
        ok: true,
        method: { id: question.id, status: 'answered', answer: { choice: '2', label: 'orange', value: 'orange' }, answeredVia: 'api' },
      });

      const again = await answer(question.id, 'red');
      expect(again.status).toBe(409);
      expect(await again.json()).toMatchObject({ error: 'not_found' });

      const done = await stream.next((e) => e.event === 'method.done');
      expect(done.id).toBe(question.id);
      expect(done.data).toMatchObject({ id: question.id, status: 'answered', answer: { value: 'orange' } });
      // The replayed method is not announced twice.
      expect(stream.events.filter((e) => e.event === 'method.pending' && e.id === question.id)).toHaveLength(1);
    } finally {
      await stream.close();
    }

    // The tool got the answer, the model read it, and the reply reached the chat.
    const sent = await chat.waitForSent(2);
    expect(sent[1].text).toBe('final: picked orange');
    expect(toolResult(h.fake.requests[1])).toBe('picked orange');
    expect(await pending()).toEqual([]);
    // The question's message now shows the outcome instead of its buttons.
    const [edit] = await chat.waitForEdits(1);
    expect(edit).toMatchObject({ chat: 'u1', text: '❓ pick_color\npalette: "warm"\n\n✅ orange (answered via the API)' });
    await h.app.waitForIdle(CONVERSATION, 5000);
    expect(chat.edits).toHaveLength(1);
  });

  it('streams a method asked while connected, as pending then done', async () => {
    const stream = await openStream();
    try {
      const question = await startPicking();
      const announced = await stream.next((e) => e.event === 'method.pending' && e.id === question.id);
      expect(announced.data.status).toBe('pending');
      expect((await answer(question.id, 'red')).status).toBe(200);
      const done = await stream.next((e) => e.event === 'method.done' && e.id === question.id);
      expect(done.data).toMatchObject({ status: 'answered', answer: { value: 'red' } });
    } finally {
      await stream.close();
    }
    expect((await chat.waitForSent(2))[1].text).toBe('final: picked red');
    await h.app.waitForIdle(CONVERSATION, 5000);
  });

  it('after the notification connection is lost and comes back, listeners get the open methods again', async () => {
    const stream = await openStream();
    try {
      const question = await startPicking({ timeout_ms: 15_000 });
      await stream.next((e) => e.event === 'method.pending' && e.id === question.id);
      // Cut the LISTEN connection, as a network blip or a database restart would.
      await h.query(sql`select pg_terminate_backend(pid) from pg_stat_activity
        where application_name = ${h.app.database.applicationName} and query ilike 'listen%'`);
      await waitFor('the method announced again', () => stream.events.filter((e) => e.event === 'method.pending' && e.id === question.id).length >= 2, 10_000);
      expect((await answer(question.id, 'red')).status).toBe(200);
      await stream.next((e) => e.event === 'method.done' && e.id === question.id, 10_000);
    } finally {
      await stream.close();
    }
    await chat.waitForSent(2);
    await h.app.waitForIdle(CONVERSATION, 5000);
  });

  it('concurrent answers: exactly one wins', async () => {
    const question = await startPicking();
    const results = await Promise.all(['red', 'orange', 'red', 'orange', 'red'].map((r) => answer(question.id, r)));
    expect(results.map((r) => r.status).sort()).toEqual([200, 409, 409, 409, 409]);
    const winner = (await results.find((r) => r.status === 200)!.json()) as { method: QuestionView };
    expect((await chat.waitForSent(2))[1].text).toBe(`final: picked ${String(winner.method.answer!.value)}`);
    await h.app.waitForIdle(CONVERSATION, 5000);
  });

  it('nobody answers: the tool sees a timeout, the method expires, the API refuses it, and the message says so', async () => {
    const stream = await openStream();
    try {
      const question = await startPicking({ timeout_ms: 1000 });
      const sent = await chat.waitForSent(2, 5000);
      expect(sent[1].text).toBe('final: timeout: RemoteMethodTimeout: no answer within 1s');

      const [row] = await h.query<{ status: string; expired_reason: string }>(sql`select status, expired_reason from questions where id = ${question.id}`);
      expect(row).toEqual({ status: 'expired', expired_reason: 'no answer in time' });
      const late = await answer(question.id, 'red');
      expect(late.status).toBe(409);
      expect(await late.json()).toMatchObject({ error: 'not_found' });
      expect(await pending()).toEqual([]);

      const done = await stream.next((e) => e.event === 'method.done' && e.id === question.id);
      expect(done.data).toMatchObject({ status: 'expired', expiredReason: 'no answer in time' });
      const edits = await chat.waitForEdits(1);
      expect(edits[0].text).toBe('❓ pick_color\npalette: "warm"\n\n⌛ Expired: no answer in time');
    } finally {
      await stream.close();
    }
    await h.app.waitForIdle(CONVERSATION, 5000);
    // Closed once, although both the waiting turn and the notification try.
    expect(chat.edits).toHaveLength(1);
  });
});

describe('remote-method API: edge cases', () => {
  it('a result is matched to the choice whose value it is, also when values look like choice ids', async () => {
    // Choices "2" and "1" get the ids "1" and "2": a client that sends the value "1" means the choice labelled "1".
    const question = await startPicking({ choices: ['2', '1'] });
    expect(question.choices).toEqual([
      { id: '1', label: '2', value: '2' },
      { id: '2', label: '1', value: '1' },
    ]);
    const res = await answer(question.id, '1');
    expect(res.status).toBe(200);
    const sent = await chat.waitForSent(2);
    expect(sent[1].text).toBe('final: picked 1');
    await h.app.waitForIdle(CONVERSATION, 5000);
  });

  it('a slow chat: when the sweep expires the method before the waiting turn\'s own timer, the tool still sees a timeout', async () => {
    // The question's message takes 600 ms to send; its expiry (1 s) is counted from before the send, the waiting
    // turn's timer from after it, so the 200 ms sweep expires the row first and notifies the waiter.
    questionSendDelayMs = 600;
    const question = await startPicking({ timeout_ms: 1000 });
    const sent = await chat.waitForSent(2, 5000);
    const [row] = await h.query<{ status: string }>(sql`select status from questions where id = ${question.id}`);
    expect(row.status).toBe('expired');
    // An expired row reaching the waiter is a timeout, not an answer (reading its null answer was a TypeError).
    expect(sent[1].text).toMatch(/^final: timeout: RemoteMethodTimeout: /);
    await h.app.waitForIdle(CONVERSATION, 5000);
  });
});

describe('remote methods in the chat: buttons', () => {
  it('shows the choices as q:<id>:<choice> buttons; a click answers, and the API comes too late', async () => {
    const question = await startPicking();
    const [message] = await chat.waitForSent(1);
    expect(message.text).toBe('❓ pick_color\npalette: "warm"');
    expect(message.buttons).toEqual([
      [
        { label: 'red', data: `q:${question.id}:1` },
        { label: 'orange', data: `q:${question.id}:2` },
      ],
    ]);
    for (const button of message.buttons!.flat()) expect(Buffer.byteLength(button.data)).toBeLessThanOrEqual(64);
    const orange = message.buttons![0][1].data;

    // Only the person who was asked (or an approver) may answer: another allowed user, or a stranger, may not.
    const byOther = await chat.inject({ kind: 'click', data: orange, text: '', chat: { id: 'u1', type: 'dm' }, sender: { id: 'u2', name: 'Bo' } });
    expect(byOther).toEqual({ status: 'click', notice: 'This question is not yours to answer.' });
    const byStranger = await chat.inject({ kind: 'click', data: orange, text: '', chat: { id: 'u1', type: 'dm' }, sender: { id: 'u9', name: 'Eve' } });
    expect(byStranger).toEqual({ status: 'click', notice: 'This question is not yours to answer.' });
    const garbage = await chat.inject({ kind: 'click', data: `q:${question.id}:9`, text: '', chat: { id: 'u1', type: 'dm' }, sender: { id: 'u1', name: 'Ana' } });
    expect(garbage).toEqual({ status: 'click', notice: 'This button is no longer active.' });
    expect((await pending()).map((q) => q.id)).toEqual([question.id]);

    const click = await chat.inject({ kind: 'click', data: orange, text: '', chat: { id: 'u1', type: 'dm' }, sender: { id: 'u1', name: 'Ana' } });
    expect(click).toEqual({ status: 'click', notice: 'Answer recorded: orange' });

    // First answer wins: the API and a second click come too late.
    const late = await answer(question.id, 'red');
    expect(late.status).toBe(409);
    expect(await late.json()).toMatchObject({ error: 'not_found' });
    const again = await chat.inject({ kind: 'click', data: message.buttons![0][0].data, text: '', chat: { id: 'u1', type: 'dm' }, sender: { id: 'u1', name: 'Ana' } });
    expect(again).toEqual({ status: 'click', notice: 'Already answered by Ana.' });

    const sent = await chat.waitForSent(2);
    expect(sent[1].text).toBe('final: picked orange');
    const [edit] = await chat.waitForEdits(1);
    expect(edit.text).toBe('❓ pick_color\npalette: "warm"\n\n✅ orange (answered by Ana)');
    const [row] = await h.query<{ status: string; answered_by: string; answered_via: string }>(
      sql`select status, answered_by, answered_via from questions where id = ${question.id}`,
    );
    expect(row).toEqual({ status: 'answered', answered_by: 'Ana', answered_via: 'button click on chat:u1' });
    await h.app.waitForIdle(CONVERSATION, 5000);
  });
});

/**
 * POSTs `total` bytes in 64 KB chunks from one buffer (so the client holds none of it), the way a client that does
 * not care about the answer would: it writes until the server stops taking data. Resolves with the response and how
 * much the server let it write.
 */
function postHuge(path: string, total: number, options: { contentLength: boolean }) {
  return new Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string; written: number }>((resolve, reject) => {
    const url = new URL(path, base);
    const req = http.request({
      host: url.hostname,
      port: url.port,
      path: url.pathname,
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json', ...(options.contentLength ? { 'content-length': String(total) } : {}) },
    });
    const chunk = Buffer.alloc(64 * 1024, 'x');
    let written = 0;
    let response: { status: number; headers: http.IncomingHttpHeaders; body: string } | undefined;
    let closed = false;
    const settle = () => {
      if (response && closed) resolve({ ...response, written });
    };
    req.on('response', (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (body += d));
      res.on('end', () => {
        response = { status: res.statusCode!, headers: res.headers, body };
        settle();
      });
    });
    // The server hanging up on the rest of the body is the expected end (EPIPE or ECONNRESET on this side).
    req.on('error', () => {});
    req.on('close', () => {
      closed = true;
      if (!response) reject(new Error(`connection closed without a response after ${written} bytes`));
      settle();
    });
    const pump = () => {
      while (written < total && !req.destroyed) {
        written += chunk.length;
        if (!req.write(chunk)) {
          req.once('drain', pump);
          return;
        }
      }
      if (written >= total) req.end();
    };
    pump();
  });
}

const mb = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MB`;

describe('remote-method API: limits', () => {
  const HUGE = 60 * 1024 * 1024;

  it.each([
    ['with a Content-Length', true],
    ['sent chunked, without a Content-Length', false],
  ])('a 60 MB answer %s is refused with 413 and a JSON error, without the server reading it', async (how, contentLength) => {
    const before = process.memoryUsage().rss;
    const res = await postHuge('/remote-methods/no-such-question/result', HUGE, { contentLength });
    const after = process.memoryUsage().rss;
    console.log(`60 MB body ${how}: ${res.status}; the server took ${mb(res.written)} before hanging up; RSS ${mb(before)} → ${mb(after)} (${mb(after - before)} more)`);
    expect(res.status).toBe(413);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    expect(JSON.parse(res.body)).toEqual({ error: 'body_too_large', message: `request bodies are limited to ${MAX_BODY_BYTES} bytes` });
    // The connection was closed on the rest: the client could not push the whole body through.
    expect(res.written).toBeLessThan(HUGE);
  });

  it('a body just under the limit is read as usual', async () => {
    const filler = 'x'.repeat(MAX_BODY_BYTES - 100);
    const res = await api('/remote-methods/no-such-question/result', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ result: filler }) });
    expect(res.status).toBe(409);
    expect(await res.json()).toMatchObject({ error: 'not_found' });
  });

  it(`at most ${MAX_EVENT_STREAMS} event streams are open at once: the next gets 503 with Retry-After and a JSON error, and a closed one makes room`, async () => {
    const streams: Awaited<ReturnType<typeof openStream>>[] = [];
    try {
      // Streams of earlier tests may still be closing on the server side: open until the limit is reached.
      await waitFor(`${MAX_EVENT_STREAMS} open streams`, async () => {
        while (streams.length < MAX_EVENT_STREAMS) {
          const controller = new AbortController();
          const res = await api('/remote-methods', { signal: controller.signal });
          if (res.status === 503) {
            await res.body?.cancel();
            return false;
          }
          streams.push(readStream(res, controller));
        }
        return true;
      });
      const refused = await api('/remote-methods');
      expect(refused.status).toBe(503);
      expect(refused.headers.get('retry-after')).toBe('30');
      expect(await refused.json()).toEqual({
        error: 'too_many_streams',
        message: `at most ${MAX_EVENT_STREAMS} event streams may be open at once; close one, or retry later`,
      });
      // The ones already open still work: each gets a method asked now.
      const question = await startPicking();
      await Promise.all(streams.map((stream) => stream.next((e) => e.event === 'method.pending' && e.id === question.id)));
      expect((await answer(question.id, 'red')).status).toBe(200);
      await chat.waitForSent(2);
      await h.app.waitForIdle(CONVERSATION, 5000);

      await streams.shift()!.close();
      const again = await waitFor('room for a new stream', async () => {
        const res = await api('/remote-methods');
        if (res.status === 200) return res;
        await res.body?.cancel();
        return undefined;
      });
      await again.body!.cancel();
    } finally {
      for (const stream of streams) await stream.close();
    }
  });
});
