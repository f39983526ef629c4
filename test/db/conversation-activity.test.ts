// task_status's one query: each conversation's model steps and the tool it ran last.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureConversation } from '../../src/db/conversations.ts';
import { conversationActivity, insertMessage } from '../../src/db/messages.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';

let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(() => t?.drop());

describe('conversationActivity', () => {
  it('counts assistant messages and names the latest tool, per conversation, in one answer', async () => {
    const db = t.database.db;
    for (const id of ['p:sub:a', 'p:sub:b', 'p:sub:c']) await ensureConversation(db, { id, persona: 'p' });
    const say = (conversationId: string, message: Parameters<typeof insertMessage>[1]['message']) => insertMessage(db, { conversationId, message });
    await say('p:sub:a', { role: 'user', content: 'task' });
    await say('p:sub:a', { role: 'assistant', content: '', toolCalls: [{ id: '1', name: 'clock', arguments: '{}' }] });
    await say('p:sub:a', { role: 'tool', toolCallId: '1', name: 'clock', content: 'noon' });
    await say('p:sub:a', { role: 'assistant', content: '', toolCalls: [{ id: '2', name: 'web_fetch', arguments: '{}' }] });
    await say('p:sub:a', { role: 'tool', toolCallId: '2', name: 'web_fetch', content: 'page' });
    await say('p:sub:b', { role: 'user', content: 'task' });
    await say('p:sub:b', { role: 'assistant', content: 'done' });
    const activity = await conversationActivity(db, ['p:sub:a', 'p:sub:b', 'p:sub:c']);
    expect(activity.get('p:sub:a')).toEqual({ steps: 2, lastTool: 'web_fetch' });
    expect(activity.get('p:sub:b')).toEqual({ steps: 1 });
    expect(activity.get('p:sub:c')).toBeUndefined();
    expect(await conversationActivity(db, [])).toEqual(new Map());
  });
});
