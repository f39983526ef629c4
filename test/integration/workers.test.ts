import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import type { ModelClient } from '../../src/llm/types.ts';
import { startHarness, type Harness } from '../support/harness.ts';

interface Call {
  worker: string;
  conversation: string;
  texts: string[];
  start: number;
  end: number;
}

const calls: Call[] = [];

/** A model that takes a while and records which worker ran which conversation when. */
function recordingModel(worker: string): ModelClient {
  return {
    provider: 'test',
    async complete(request) {
      const texts = request.messages.filter((m) => m.role === 'user').map((m) => m.content.replace(/^\[[^\]]*\]\s*/, ''));
      const conversation = texts.at(-1)!.split('-')[0];
      const start = Date.now();
      await new Promise((r) => setTimeout(r, 150));
      calls.push({ worker, conversation, texts, start, end: Date.now() });
      return { text: `ok ${texts.at(-1)}`, toolCalls: [], usage: { input: 10, output: 2 }, stopReason: 'stop' };
    },
  };
}

let h: Harness;

beforeAll(async () => {
  h = await startHarness({ app: { model: recordingModel('A'), workerConcurrency: 4 } });
  await h.startPeer({ model: recordingModel('B'), workerConcurrency: 4 });
});
afterAll(async () => {
  await h?.stop();
});

describe('two workers on one database', () => {
  it('run many conversations at once but never two turns of one conversation', async () => {
    const conversations = ['c1', 'c2', 'c3', 'c4', 'c5', 'c6'];
    for (let round = 0; round < 3; round++) {
      for (const c of conversations) {
        await h.chat.inject({ text: `${c}-r${round}`, chat: { id: 'g2', type: 'group', thread: c } });
        await new Promise((r) => setTimeout(r, 25));
      }
    }
    for (const c of conversations) await h.app.waitForIdle(`testy:chat:g2:${c}`, 30_000);

    // Every message was seen by the model, in order, in its own conversation.
    for (const c of conversations) {
      const seen = calls.filter((x) => x.conversation === c).flatMap((x) => x.texts.filter((t) => t.startsWith(`${c}-`)));
      expect(new Set(seen)).toEqual(new Set([`${c}-r0`, `${c}-r1`, `${c}-r2`]));
      expect(calls.filter((x) => x.conversation === c).every((x) => x.texts.every((t) => t.startsWith(`${c}-`)))).toBe(true);
    }

    // One turn at a time per conversation ...
    for (const c of conversations) {
      const mine = calls.filter((x) => x.conversation === c).sort((a, b) => a.start - b.start);
      for (let i = 1; i < mine.length; i++) expect(mine[i].start).toBeGreaterThanOrEqual(mine[i - 1].end);
    }
    const turns = (await h.app.database.db.execute(
      sql`select conversation_id, started_at, ended_at from turns where conversation_id like 'testy:chat:g2:%' order by started_at`,
    )) as unknown as { conversation_id: string; started_at: string; ended_at: string }[];
    for (const c of conversations) {
      const mine = turns.filter((t) => t.conversation_id.endsWith(`:${c}`));
      for (let i = 1; i < mine.length; i++) expect(new Date(mine[i].started_at).getTime()).toBeGreaterThanOrEqual(new Date(mine[i - 1].ended_at).getTime());
    }
    // ... while different conversations ran side by side, on both workers.
    const overlapping = calls.some((a) => calls.some((b) => a.conversation !== b.conversation && a.start < b.end && b.start < a.end));
    expect(overlapping).toBe(true);
    expect(new Set(calls.map((x) => x.worker))).toEqual(new Set(['A', 'B']));

    // Every turn's reply reached the chat (replies from the peer go through the outbox).
    const replies = await h.chat.waitForSent(calls.length, 10_000);
    expect(replies).toHaveLength(calls.length);
  });
});
