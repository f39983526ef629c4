import type { Hono } from 'hono';
import { bearerAuth } from 'hono/bearer-auth';
import { streamSSE, type SSEStreamingApi } from 'hono/streaming';
import type { Logger } from 'pino';
import type { QuestionEvent, Questions } from '#src/questions/service.ts';

const KEEPALIVE_MS = 15_000;
/** Event streams one process serves at once; each holds a connection and a listener for as long as it is open. */
export const MAX_EVENT_STREAMS = 16;
/** What a client turned away for too many streams is told to wait before it tries again. */
const STREAM_RETRY_AFTER_SECONDS = 30;

/**
 * The remote-method API for other UIs: every open question (tool approvals, remote methods, `ask_user`) as a
 * server-sent event stream, a list, and a way to answer. All of it needs `Authorization: Bearer <token>`.
 */
export function mountRemoteMethodApi(app: Hono, options: { token?: string; questions: Pick<Questions, 'pending' | 'subscribe' | 'answerFromApi'>; log: Logger }) {
  const { token, questions, log } = options;
  let openStreams = 0;
  if (!token) {
    log.info('remote-method API is off: set PARLOR_API_TOKEN to turn it on');
    return;
  }
  app.use('/remote-methods', bearerAuth({ token }));
  app.use('/remote-methods/*', bearerAuth({ token }));

  app.get('/remote-methods/pending', async (c) => c.json({ methods: await questions.pending() }));

  app.post('/remote-methods/:id/result', async (c) => {
    let body: unknown;
    try {
      body = await c.req.json();
    } catch {
      return c.json({ error: 'invalid_body', message: 'send a JSON object {"result": ...}' }, 400);
    }
    if (!body || typeof body !== 'object' || !('result' in body)) {
      return c.json({ error: 'invalid_body', message: 'send a JSON object {"result": ...}' }, 400);
    }
    const outcome = await questions.answerFromApi(c.req.param('id'), (body as { result: unknown }).result);
    if (outcome.status === 'not_found') return c.json({ error: 'not_found', message: 'no open remote method with this id (answered, expired or unknown)' }, 409);
    if (outcome.status === 'invalid') return c.json({ error: 'invalid_result', message: outcome.error }, 400);
    return c.json({ ok: true, method: outcome.question });
  });

  app.get('/remote-methods', (c) => {
    if (openStreams >= MAX_EVENT_STREAMS) {
      log.warn({ openStreams }, 'remote-method event stream refused: too many open');
      c.header('Retry-After', String(STREAM_RETRY_AFTER_SECONDS));
      return c.json({ error: 'too_many_streams', message: `at most ${MAX_EVENT_STREAMS} event streams may be open at once; close one, or retry later` }, 503);
    }
    openStreams++;
    return streamSSE(c, async (stream) => {
      try {
        await streamQuestions(stream, questions);
      } finally {
        openStreams--;
      }
    });
  });
}

/** Every open question, then every change to one, until the client goes away; a comment line keeps it alive. */
async function streamQuestions(stream: SSEStreamingApi, questions: Pick<Questions, 'pending' | 'subscribe'>): Promise<void> {
  const queue: QuestionEvent[] = [];
  let wake: (() => void) | undefined;
  let closed = false;
  // Listening starts before the replay, so nothing that happens in between is missed.
  const unsubscribe = questions.subscribe((event) => {
    queue.push(event);
    wake?.();
  });
  stream.onAbort(() => {
    closed = true;
    unsubscribe();
    wake?.();
  });
  const replayed = new Set<string>();
  try {
    for (const question of await questions.pending()) {
      replayed.add(question.id);
      await stream.writeSSE({ event: 'method.pending', id: question.id, data: JSON.stringify(question) });
    }
    while (!closed) {
      while (queue.length) {
        const event = queue.shift()!;
        if (event.type === 'method.pending' && replayed.has(event.question.id)) continue;
        await stream.writeSSE({ event: event.type, id: event.question.id, data: JSON.stringify(event.question) });
      }
      const idle = await new Promise<boolean>((resolve) => {
        const timer = setTimeout(() => resolve(true), KEEPALIVE_MS);
        wake = () => {
          clearTimeout(timer);
          resolve(false);
        };
      });
      wake = undefined;
      if (idle && !closed) await stream.write(': keepalive\n\n');
    }
  } finally {
    unsubscribe();
  }
}
