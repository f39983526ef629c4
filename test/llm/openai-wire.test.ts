// The OpenAI-compatible client on the wire, against a bare HTTP server that answers as a test says: the connection
// kept between calls, what an endpoint says when it fails (JSON or not), an error event mid-answer, a line that is
// not JSON, and an answer that arrives a byte at a time.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { createOpenAiClient } from '#src/llm/openai.ts';
import { ModelError, type ModelRequest } from '#src/llm/types.ts';

let server: Server | undefined;
afterEach(async () => {
  if (!server) return;
  server.closeAllConnections();
  await new Promise((r) => server!.close(r));
  server = undefined;
});

/** A server answering each request with `answer`; counts the TCP connections it was opened. */
async function serve(answer: (req: IncomingMessage, res: ServerResponse, body: string) => void) {
  const seen = { connections: 0, requests: [] as { headers: IncomingMessage['headers']; body: any }[] };
  server = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      seen.requests.push({ headers: req.headers, body: JSON.parse(body) });
      answer(req, res, body);
    });
  });
  server.on('connection', () => seen.connections++);
  await new Promise<void>((r) => server!.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return { baseUrl: `http://127.0.0.1:${port}/v1`, seen };
}

const chunk = (delta: object, extra: object = {}) => `data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta, finish_reason: null }], ...extra })}\n\n`;
const done = `data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta: {}, finish_reason: 'stop' }], usage: { prompt_tokens: 9, completion_tokens: 2 } })}\n\ndata: [DONE]\n\n`;
const request = (): ModelRequest => ({ model: 'm', system: 'be brief', messages: [{ role: 'user', content: 'hi' }], tools: [] });

async function failure(promise: Promise<unknown>): Promise<ModelError> {
  const err = await promise.then(() => undefined, (e: unknown) => e);
  expect(err).toBeInstanceOf(ModelError);
  return err as ModelError;
}

describe('the OpenAI-compatible client on the wire', () => {
  it('keeps its connection for the next call, and sends the key, the model and a stream request', async () => {
    const { baseUrl, seen } = await serve((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.end(chunk({ role: 'assistant', content: 'hello' }) + done);
    });
    const client = createOpenAiClient({ baseUrl: `${baseUrl}/`, apiKey: 'sk-test' });
    for (let i = 0; i < 10; i++) expect((await client.complete(request())).text).toBe('hello');
    expect(seen.connections, 'connections opened for 10 calls').toBeLessThanOrEqual(2);
    expect(seen.requests[0].headers.authorization).toBe('Bearer sk-test');
    expect(seen.requests[0].body).toMatchObject({ model: 'm', stream: true, stream_options: { include_usage: true }, messages: [{ role: 'system', content: 'be brief' }, { role: 'user', content: 'hi' }] });
  });

  it('sends tools before the messages, byte for byte as JSON.stringify writes the request, and a tool that changed as it is now', async () => {
    const raw: string[] = [];
    const { baseUrl } = await serve((_req, res, body) => {
      raw.push(body);
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.end(chunk({ role: 'assistant', content: 'ok' }) + done);
    });
    const client = createOpenAiClient({ baseUrl });
    const parameters = { type: 'object', properties: { city: { type: 'string', description: 'a "quoted" name \u2028 ü' } }, required: ['city'] };
    const withTools = (description: string): ModelRequest => ({
      ...request(),
      tools: [
        { name: 'weather', description, parameters },
        { name: 'none', description: 'takes nothing', parameters: { type: 'object', properties: {} } },
      ],
      toolChoice: { name: 'weather' },
      thinking: true,
      maxTokens: 100,
    });
    const expected = (r: ModelRequest) =>
      JSON.stringify({
        model: r.model,
        tools: r.tools.map((t) => ({ type: 'function', function: { name: t.name, description: t.description, parameters: t.parameters } })),
        messages: [{ role: 'system', content: r.system }, ...r.messages],
        tool_choice: { type: 'function', function: { name: 'weather' } },
        max_tokens: 100,
        reasoning_effort: 'high',
        stream: true,
        stream_options: { include_usage: true },
      });
    for (const description of ['the weather', 'the weather', 'the weather, now with rain', 'the weather']) {
      await client.complete(withTools(description));
      expect(raw.at(-1)).toBe(expected(withTools(description)));
    }
    await client.complete(request());
    expect(JSON.parse(raw.at(-1)!)).not.toHaveProperty('tools');
    expect(JSON.parse(raw.at(-1)!)).not.toHaveProperty('tool_choice');
  });

  it("an answer that comes a byte at a time is read whole, its usage too", async () => {
    const { baseUrl } = await serve(async (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const all = Buffer.from(chunk({ role: 'assistant', content: 'héllo wörld' }) + done);
      for (const byte of all) {
        res.write(Buffer.from([byte]));
        await new Promise((r) => setImmediate(r));
      }
      res.end();
    });
    const result = await createOpenAiClient({ baseUrl }).complete(request());
    expect(result).toMatchObject({ text: 'héllo wörld', stopReason: 'stop', usage: { input: 9, output: 2 } });
  });

  it("a failure is told in the endpoint's own words: its JSON error's message, or its text", async () => {
    const answers = [
      { status: 400, type: 'application/json', body: JSON.stringify({ error: { message: 'tools[0].function.name is invalid', type: 'invalid_request_error' } }) },
      { status: 502, type: 'text/html', body: '<html>Bad Gateway</html>' },
      { status: 503, type: 'text/plain', body: '' },
      { status: 404, type: 'application/json', body: JSON.stringify({ message: 'model "x" not found' }) },
    ];
    let next = 0;
    const { baseUrl } = await serve((_req, res) => {
      const a = answers[next++];
      res.writeHead(a.status, { 'content-type': a.type, 'retry-after': '2' });
      res.end(a.body);
    });
    const client = createOpenAiClient({ baseUrl });
    expect(await failure(client.complete(request()))).toMatchObject({ kind: 'request', status: 400, retryable: false, message: '400 tools[0].function.name is invalid' });
    expect(await failure(client.complete(request()))).toMatchObject({ kind: 'server', status: 502, retryable: true, retryAfterMs: 2000, message: '502 <html>Bad Gateway</html>' });
    expect(await failure(client.complete(request()))).toMatchObject({ kind: 'server', status: 503, message: '503 status code (no body)' });
    expect(await failure(client.complete(request()))).toMatchObject({ kind: 'request', status: 404, message: '404 model "x" not found' });
  });

  it('a connection dropped mid-answer is a retryable network error, said in words', async () => {
    const { baseUrl } = await serve((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(chunk({ role: 'assistant', content: 'half' }));
      setTimeout(() => res.socket?.destroy(), 20);
    });
    const err = await failure(createOpenAiClient({ baseUrl }).complete(request()));
    expect(err).toMatchObject({ kind: 'network', retryable: true, message: `the connection to ${new URL(baseUrl).host} was dropped` });
  });

  it('an error the endpoint sends as an event mid-answer, or a line that is not JSON, is a retryable network error', async () => {
    let next = 0;
    const { baseUrl } = await serve((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(chunk({ role: 'assistant', content: 'half an ans' }));
      res.end(next++ === 0 ? `data: ${JSON.stringify({ error: { message: 'upstream provider overloaded', code: 502 } })}\n\n` : 'data: {"choices": [\n\n');
    });
    const client = createOpenAiClient({ baseUrl });
    const broke = await failure(client.complete(request()));
    expect(broke).toMatchObject({ kind: 'network', retryable: true });
    expect(broke.message).toContain('upstream provider overloaded');
    const unreadable = await failure(client.complete(request()));
    expect(unreadable).toMatchObject({ kind: 'network', retryable: true });
    expect(unreadable.message).toMatch(/^the model's answer could not be read/);
  });

  it('a server that is not there is a retryable network error, said in words', async () => {
    const { baseUrl } = await serve(() => {});
    server!.close();
    server = undefined;
    const err = await failure(createOpenAiClient({ baseUrl }).complete(request()));
    expect(err).toMatchObject({ kind: 'network', retryable: true, status: undefined, message: `connection refused by ${new URL(baseUrl).host}` });
  });
});
