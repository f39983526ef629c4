// The transcript reads in the order turns read it: a person's message waiting while other turns of the conversation
// write (a reminder's wake turn that started first, the answer of the turn before) comes after what they wrote.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureConversation } from '../../src/db/conversations.ts';
import { claimPendingMessages, insertMessage, recentMessages } from '../../src/db/messages.ts';
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
