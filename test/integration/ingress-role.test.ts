// An ingress process (connectors and HTTP, no turns) with a worker process beside it on one database: the worker
// runs the turns, and their replies go out through the connector the ingress process runs.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHarness, type Harness } from '../support/harness.ts';

describe('--role ingress beside --role worker', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ app: { worker: false } });
  });
  afterAll(() => h?.stop());

  it('takes the message, runs no turn itself, and the worker that joins answers through it', async () => {
    await h.chat.inject({ text: 'hello there' });
    await new Promise((r) => setTimeout(r, 700));
    // Stored and queued, waiting for a worker.
    expect(h.chat.sent).toHaveLength(0);
    expect(h.fake.requests).toHaveLength(0);
    const worker = await h.startPeer({ worker: true });
    try {
      const [reply] = await h.chat.waitForSent(1, 20_000);
      expect(reply.text).toBe('echo: hello there');
      await h.chat.inject({ text: 'and again' });
      const [, second] = await h.chat.waitForSent(2, 20_000);
      expect(second.text).toBe('echo: and again');
    } finally {
      await worker.stop();
    }
  });
});
