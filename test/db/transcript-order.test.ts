// The transcript reads in the order turns read it: a person's message waiting while other turns of the conversation
// write (a reminder's wake turn that started first, the answer of the turn before) comes after what they wrote.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureConversation } from '../../src/db/conversations.ts';
import { claimPendingMessages, historySince, insertMessage, recentMessages } from '../../src/db/messages.ts';
import { startUserTurn } from '../../src/db/turns.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';

let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(() => t?.drop());

const texts = async (conversationId: string) =>
  (await recentMessages(t.database.db, conversationId, { afterId: 0, limit: 100 })).map((r) => `${r.message.role}: ${r.message.content}`);

describe('the order of the transcript', () => {
  it.each([
    ['a user turn', (conversationId: string, turnId: string) => startUserTurn(t.database.db, { id: turnId, conversationId, persona: 'p', jobId: randomUUID() })],
    ['claimPendingMessages', (conversationId: string, turnId: string) => claimPendingMessages(t.database.db, conversationId, turnId)],
  ])('a message that waited while a wake turn wrote comes after the wake turn, claimed by %s', async (_label, claim) => {
    const db = t.database.db;
    const conversationId = `p:chat:${randomUUID().slice(0, 8)}`;
    await ensureConversation(db, { id: conversationId, persona: 'p' });
    // The person writes; the wake turn of a reminder due just before runs first and writes its prompt and answer.
    await insertMessage(db, { conversationId, message: { role: 'user', content: 'hello' } });
    const wake = randomUUID();
    await insertMessage(db, { conversationId, turnId: wake, message: { role: 'user', content: '[reminder] stretch' } });
    await insertMessage(db, { conversationId, turnId: wake, message: { role: 'assistant', content: 'time to stretch' } });
    // Then the user turn reads the message that waited.
    const turn = randomUUID();
    await claim(conversationId, turn);
    await insertMessage(db, { conversationId, turnId: turn, message: { role: 'assistant', content: 'hi' } });
    expect(await texts(conversationId)).toEqual(['user: [reminder] stretch', 'assistant: time to stretch', 'user: hello', 'assistant: hi']);
  });
});

describe('the history a user turn reads as it begins', () => {
  // The history read in the statement that claims the messages is what historySince reads after the claim.
  const start = (conversationId: string, historyLimit?: number) =>
    startUserTurn(t.database.db, { id: randomUUID(), conversationId, persona: 'p', jobId: randomUUID() }, historyLimit === undefined ? {} : { historyLimit });

  it('holds the turns before, the messages it claims, and the summary, as a read after the claim does', async () => {
    const db = t.database.db;
    const conversationId = `p:chat:${randomUUID().slice(0, 8)}`;
    await ensureConversation(db, { id: conversationId, persona: 'p' });
    for (let i = 0; i < 6; i++) {
      await insertMessage(db, { conversationId, message: { role: 'user', content: `q${i}` } });
      const { claimed } = await start(conversationId);
      expect(claimed).toHaveLength(1);
    }
    const [, , third] = await recentMessages(db, conversationId, { afterId: 0, limit: 100 });
    await t.database.sql`insert into conversation_summaries (conversation_id, summary, through_message_id) values (${conversationId}, 'earlier', ${third.id})`;
    // Two messages wait; a wake turn writes meanwhile.
    await insertMessage(db, { conversationId, message: { role: 'user', content: 'waiting 1' } });
    await insertMessage(db, { conversationId, message: { role: 'user', content: 'waiting 2' } });
    await insertMessage(db, { conversationId, turnId: randomUUID(), message: { role: 'assistant', content: 'a wake turn wrote' } });

    const begun = await start(conversationId, 4);
    expect(begun.claimed.map((c) => c.message.content)).toEqual(['waiting 1', 'waiting 2']);
    const after = await historySince(db, conversationId, { afterId: 0, limit: 4 });
    expect(begun.history).toEqual(after);
    expect(begun.history!.summary).toEqual({ summary: 'earlier', throughMessageId: third.id });
    expect(begun.history!.rows.map((r) => r.message.content)).toEqual(['q5', 'a wake turn wrote', 'waiting 1', 'waiting 2']);
    // With more room, everything after the summary, oldest first.
    const wide = await historySince(db, conversationId, { afterId: 0, limit: 100 });
    expect(wide.rows.map((r) => r.message.content)).toEqual(['q3', 'q4', 'q5', 'a wake turn wrote', 'waiting 1', 'waiting 2']);
  });

  it('starts after where the conversation was started afresh, without a summary from before it', async () => {
    const db = t.database.db;
    const conversationId = `p:chat:${randomUUID().slice(0, 8)}`;
    await ensureConversation(db, { id: conversationId, persona: 'p' });
    await insertMessage(db, { conversationId, message: { role: 'user', content: 'old' } });
    await start(conversationId);
    const [old] = await recentMessages(db, conversationId, { afterId: 0, limit: 100 });
    await t.database.sql`insert into conversation_summaries (conversation_id, summary, through_message_id) values (${conversationId}, 'before /new', ${old.id})`;
    await t.database.sql`update conversations set history_after_id = ${old.id} where id = ${conversationId}`;
    await insertMessage(db, { conversationId, message: { role: 'user', content: 'new' } });
    const begun = await start(conversationId, 100);
    expect(begun.conversation.historyAfterId).toBe(old.id);
    expect(begun.history).toEqual({ summary: undefined, rows: [expect.objectContaining({ message: { role: 'user', content: 'new' } })] });
    expect(begun.history).toEqual(await historySince(db, conversationId, { afterId: old.id, limit: 100 }));
  });

  it('is not read unless asked for', async () => {
    const conversationId = `p:chat:${randomUUID().slice(0, 8)}`;
    await ensureConversation(t.database.db, { id: conversationId, persona: 'p' });
    await insertMessage(t.database.db, { conversationId, message: { role: 'user', content: 'hi' } });
    expect(await start(conversationId)).not.toHaveProperty('history');
  });

  it("reads the conversation's state without writing its row, and creates a conversation that is not there", async () => {
    const sql = t.database.sql;
    const conversationId = `p:chat:${randomUUID().slice(0, 8)}`;
    await ensureConversation(t.database.db, { id: conversationId, persona: 'p' });
    await sql`update conversations set thinking = true, active_tools = ${['web_search']} where id = ${conversationId}`;
    await insertMessage(t.database.db, { conversationId, message: { role: 'user', content: 'hi' } });
    const [before] = await sql<{ ctid: string }[]>`select ctid::text from conversations where id = ${conversationId}`;
    const begun = await start(conversationId);
    expect(begun.conversation).toEqual({ historyAfterId: 0, thinking: true, activeTools: ['web_search'] });
    expect(begun.claimed).toHaveLength(1);
    // The same version of the row: the turn's start left it as it was.
    expect(await sql`select ctid::text from conversations where id = ${conversationId}`).toEqual([before]);

    const missing = `p:chat:${randomUUID().slice(0, 8)}`;
    expect((await start(missing)).conversation).toEqual({ historyAfterId: 0, thinking: false, activeTools: [] });
    expect(await sql`select persona from conversations where id = ${missing}`).toEqual([{ persona: 'p' }]);
  });
});
