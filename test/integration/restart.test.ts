import { afterAll, describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import type { ModelClient, ModelRequest } from '../../src/llm/types.ts';
import { startHarness, type Harness } from '../support/harness.ts';
import { createRecordingConnector } from '../support/recording-connector.ts';

let h: Harness | undefined;
afterAll(async () => {
  await h?.stop();
});

/** A model whose answer takes until it is aborted (the process shuts down mid-call). */
function hangingModel(started: () => void): ModelClient {
  return {
    provider: 'test',
    complete: (request: ModelRequest) =>
      new Promise((_, reject) => {
        started();
        request.signal?.addEventListener('abort', () => reject(new Error('aborted')), { once: true });
      }),
  };
}

const answeringModel: ModelClient = {
  provider: 'test',
  async complete(request) {
    const last = request.messages.filter((m) => m.role === 'user').at(-1)!;
    return { text: `answered after restart: ${last.content}`, toolCalls: [], usage: { input: 5, output: 5 }, stopReason: 'stop' };
  },
};

describe('a restart in the middle of a turn', () => {
  it('releases the turn at shutdown and answers it exactly once after the next start', async () => {
    let modelStarted!: () => void;
    const inFlight = new Promise<void>((r) => (modelStarted = r));
    h = await startHarness({ app: { model: hangingModel(() => modelStarted()) } });
    await h.chat.inject({ text: 'are you still there?' });
    await inFlight;

    const t0 = Date.now();
    await h.app.stop();
    expect(Date.now() - t0).toBeLessThan(8000);
    expect(h.chat.sent).toHaveLength(0);

    const chat = createRecordingConnector('chat');
    const next = await h.startPeer({ model: answeringModel, connectors: () => [chat] });
    const [reply] = await chat.waitForSent(1, 20_000);
    expect(reply.text).toBe('answered after restart: are you still there?');
    await next.waitForIdle('testy:chat:u1');
    await new Promise((r) => setTimeout(r, 300));
    expect(chat.sent).toHaveLength(1);

    const turns = (await next.database.db.execute(sql`select status from turns where conversation_id = 'testy:chat:u1'`)) as unknown as { status: string }[];
    expect(turns.map((t) => t.status)).toEqual(['ok']);
  }, 60_000);
});

describe('a turn that finishes during shutdown', () => {
  it('still gets its reply out through the connector before the process stops', async () => {
    const slow: ModelClient = {
      provider: 'test',
      async complete() {
        await new Promise((r) => setTimeout(r, 800));
        return { text: 'made it', toolCalls: [], usage: { input: 1, output: 1 }, stopReason: 'stop' };
      },
    };
    const local = await startHarness({ app: { model: slow } });
    try {
      await local.chat.inject({ text: 'quick one' });
      await new Promise((r) => setTimeout(r, 200));
      await local.app.stop();
      expect(local.chat.sent.map((m) => m.text)).toEqual(['made it']);
    } finally {
      await local.stop();
    }
  }, 30_000);
});
