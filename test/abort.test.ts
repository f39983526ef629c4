// A request's time limit holds while garbage is collected: on Node 20, AbortSignal.any over AbortSignal.timeout
// lost the timeout in a collection, and a web search against a silent provider waited for ever.
import v8 from 'node:v8';
import vm from 'node:vm';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createWebSearchTool } from '../tools/web-search.ts';
import { deadline } from '#src/abort.ts';
import { createEmbeddingClient } from '#src/memory/embeddings.ts';
import { createSearxngProvider } from '#src/tools/web/search.ts';
import { makeToolContext } from './support/persona.ts';
import { startWebServer, type TestWebServer } from './tools/web-test-server.ts';

let silent: TestWebServer;
let collecting: NodeJS.Timeout | undefined;

beforeAll(async () => {
  silent = await startWebServer();
  silent.route('/search', () => undefined);
  silent.route('/embeddings', () => undefined);
});
afterAll(() => silent.close());
afterEach(() => clearInterval(collecting));

/** Full collections every few milliseconds, as a busy process has them while it waits. */
function collectGarbageOften() {
  v8.setFlagsFromString('--expose-gc');
  const gc = vm.runInNewContext('gc') as () => void;
  collecting = setInterval(gc, 5);
}

const base = () => `http://127.0.0.1:${silent.port}`;

async function timeTaken(run: () => Promise<unknown>): Promise<{ ms: number; outcome: unknown }> {
  const started = Date.now();
  const outcome = await run().catch((err: unknown) => err);
  return { ms: Date.now() - started, outcome };
}

describe('deadline', () => {
  it('ends requests to a server that never answers on time, while garbage is collected', async () => {
    collectGarbageOften();
    const caller = new AbortController();
    const runs = await Promise.all(
      Array.from({ length: 10 }, () =>
        timeTaken(async () => {
          const limit = deadline(300, caller.signal);
          return fetch(`${base()}/search`, { signal: limit.signal }).finally(limit.clear);
        }),
      ),
    );
    for (const run of runs) {
      expect((run.outcome as Error).name).toBe('TimeoutError');
      expect(run.ms).toBeLessThan(2_000);
    }
  });

  it("ends at once when the caller's signal aborts, with the caller's reason", async () => {
    const caller = new AbortController();
    const limit = deadline(10_000, caller.signal);
    setTimeout(() => caller.abort(new Error('stopped')), 50);
    const run = await timeTaken(() => fetch(`${base()}/search`, { signal: limit.signal }));
    limit.clear();
    expect((run.outcome as Error).message).toBe('stopped');
    expect(run.ms).toBeLessThan(2_000);
  });

  it('does not abort once cleared', async () => {
    const limit = deadline(30);
    limit.clear();
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(limit.signal.aborted).toBe(false);
  });
});

describe('time limits that hold while garbage is collected', () => {
  it('web_search gives up on a silent provider', async () => {
    collectGarbageOften();
    const tool = createWebSearchTool({ provider: createSearxngProvider({ url: base() }, { timeoutMs: 300, retryDelayMs: 10 }) });
    const run = await timeTaken(() => tool.run({ query: 'rain' }, makeToolContext()));
    expect(run.outcome).toBe('error: web search failed: SearXNG did not answer within 0.3 s.');
    expect(run.ms).toBeLessThan(2_000);
  });

  it('an embedding request gives up on a silent endpoint', async () => {
    collectGarbageOften();
    const client = createEmbeddingClient({ baseUrl: base(), model: 'm' });
    const run = await timeTaken(() => client.embed(['rain'], { timeoutMs: 300 }));
    expect((run.outcome as Error).message).toMatch(/^cannot reach http:\/\/127\.0\.0\.1:\d+\/embeddings: The operation was aborted due to timeout/);
    expect(run.ms).toBeLessThan(2_000);
  });
});
