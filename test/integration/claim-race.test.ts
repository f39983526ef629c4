// A turn claiming its messages while something else briefly holds one of them (an attachment's download writing
// where the file went) waits for it instead of skipping it, which left the message unanswered until the next one.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { claimPendingMessages } from '../../src/db/messages.ts';
import { startUserTurn } from '../../src/db/turns.ts';
import { startHarness, type Harness } from '../support/harness.ts';

let h: Harness;

beforeAll(async () => {
  // No workers: the test claims the message itself.
  h = await startHarness({ app: { worker: false } });
});
afterAll(() => h?.stop());

describe('claiming the messages a turn answers', () => {
  it('waits for a message another transaction holds, and claims it', async () => {
    await h.chat.inject({ text: 'a photo is on its way' });
    const held = await h.app.database.sql.reserve();
    try {
      await held`begin`;
      await held`select id from messages where conversation_id = 'testy:chat:u1' and turn_id is null for update`;
      const claim = claimPendingMessages(h.app.database.db, 'testy:chat:u1', randomUUID());
      await new Promise((r) => setTimeout(r, 300));
      await held`commit`;
      const claimed = await claim;
      expect(claimed.map((m) => m.message.content)).toEqual(['a photo is on its way']);
    } finally {
      held.release();
    }
  });

  it('starting a turn (one statement) waits for it too, claims it and records the turn; with nothing waiting, no turn', async () => {
    await h.chat.inject({ text: 'and here it is' });
    const held = await h.app.database.sql.reserve();
    const turn = { conversationId: 'testy:chat:u1', persona: 'testy', connector: 'chat', chat: 'u1', origin: { connector: 'chat', chat: 'u1' } };
    const first = { ...turn, id: randomUUID(), jobId: randomUUID() };
    try {
      await held`begin`;
      await held`select id from messages where conversation_id = 'testy:chat:u1' and turn_id is null for update`;
      const start = startUserTurn(h.app.database.bookkeeping, first);
      await new Promise((r) => setTimeout(r, 300));
      await held`commit`;
      const started = await start;
      expect(started.claimed.map((m) => m.message.content)).toEqual(['and here it is']);
      expect(started.conversation).toEqual({ historyAfterId: 0, thinking: false, activeTools: [] });
    } finally {
      held.release();
    }
    const second = { ...turn, id: randomUUID(), jobId: randomUUID() };
    expect((await startUserTurn(h.app.database.bookkeeping, second)).claimed).toEqual([]);
    const turns = await h.app.database.sql<{ id: string; status: string; origin: unknown }[]>`
      select id, status, origin from turns where id in (${first.id}, ${second.id})`;
    expect(turns).toEqual([{ id: first.id, status: 'running', origin: turn.origin }]);
  });
});
