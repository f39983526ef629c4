// A reply's ledger row carries the turn's answer into the transcript, and its sent mark the turn's end: each pair is
// one statement, so neither half is ever written without the other.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureConversation } from '../../src/db/conversations.ts';
import { recentMessages } from '../../src/db/messages.ts';
import { insertOutbound, markOutboundSent } from '../../src/db/outbound-messages.ts';
import { insertTurn } from '../../src/db/turns.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';

let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(() => t?.drop());

async function aTurn() {
  const conversationId = `p:chat:${randomUUID().slice(0, 8)}`;
  const turnId = randomUUID();
  await ensureConversation(t.database.db, { id: conversationId, persona: 'p' });
  await insertTurn(t.database.db, { id: turnId, conversationId, kind: 'user' });
  const reply = (text: string) => ({
    dedupeKey: `turn:${turnId}:reply`,
    turnId,
    conversationId,
    connector: 'chat',
    chat: conversationId,
    text,
    transcript: { role: 'assistant' as const, content: text },
    status: 'sending' as const,
    claimedBy: 'me',
  });
  const said = async () => (await recentMessages(t.database.db, conversationId, { afterId: 0, limit: 10 })).map((r) => r.message);
  return { conversationId, turnId, reply, said };
}

describe('the reply and its answer', () => {
  it('are written together', async () => {
    const { reply, said } = await aTurn();
    const row = await insertOutbound(t.database.db, reply('hi there'));
    expect(row?.status).toBe('sending');
    expect(await said()).toEqual([{ role: 'assistant', content: 'hi there' }]);
  });

  it('once: a second writing of the same reply (a rerun) writes no second answer', async () => {
    const { reply, said } = await aTurn();
    await insertOutbound(t.database.db, reply('once'));
    expect(await insertOutbound(t.database.db, reply('once'))).toBeUndefined();
    expect(await said()).toEqual([{ role: 'assistant', content: 'once' }]);
  });

  it('neither, when the ledger row cannot be written', async () => {
    const { reply, said } = await aTurn();
    const sql = t.database.sql;
    await sql`create or replace function refuse_reply() returns trigger language plpgsql as $$ begin raise exception 'refused'; end $$`;
    await sql`create trigger refuse_reply before insert on outbound_messages for each row execute function refuse_reply()`;
    try {
      await expect(insertOutbound(t.database.db, reply('lost together'))).rejects.toThrow(/refused/);
    } finally {
      await sql`drop trigger refuse_reply on outbound_messages`;
    }
    expect(await said()).toEqual([]);
  });

  it('without an answer, as before: a message the turn sends of itself', async () => {
    const { reply, said } = await aTurn();
    const { transcript: _, ...plain } = reply('a notice');
    expect(await insertOutbound(t.database.db, plain)).toBeDefined();
    expect(await said()).toEqual([]);
  });
});

describe('the sent mark and the turn end', () => {
  const end = { status: 'ok', inputTokens: 12, outputTokens: 3, cacheReadTokens: 4, cacheWriteTokens: 0, modelCalls: 1, summary: 'done' };
  const turnOf = async (id: string) => (await t.database.sql`select status, input_tokens, output_tokens, cache_read_tokens, model_calls, summary, ended_at from turns where id = ${id}`)[0];

  it('are written together', async () => {
    const { turnId, reply } = await aTurn();
    const row = (await insertOutbound(t.database.db, reply('sent')))!;
    await markOutboundSent(t.database.db, row.id, ['m1'], 1, end);
    const [ledger] = await t.database.sql`select status, platform_message_ids from outbound_messages where id = ${row.id}`;
    expect(ledger).toEqual({ status: 'sent', platform_message_ids: ['m1'] });
    expect(await turnOf(turnId)).toMatchObject({ status: 'ok', input_tokens: 12, output_tokens: 3, cache_read_tokens: 4, model_calls: 1, summary: 'done' });
    expect((await turnOf(turnId)).ended_at).not.toBeNull();
  });

  it('leave the turn running when no end is given', async () => {
    const { turnId, reply } = await aTurn();
    const row = (await insertOutbound(t.database.db, reply('sent')))!;
    await markOutboundSent(t.database.db, row.id, ['m2'], 1);
    expect(await turnOf(turnId)).toMatchObject({ status: 'running', ended_at: null });
  });

  it("record the thread the reply landed in, with or without the turn's end: once the turn has ended, the thread is its conversation's", async () => {
    for (const ends of [end, undefined]) {
      const { conversationId, turnId, reply } = await aTurn();
      const row = (await insertOutbound(t.database.db, reply('in a thread')))!;
      const thread = { connector: 'chat', chat: conversationId, thread: `t-${turnId}`, conversationId };
      await markOutboundSent(t.database.db, row.id, ['m4'], 1, ends, thread);
      const recorded = await t.database.sql`select conversation_id from conversation_threads where connector = 'chat' and chat = ${conversationId} and thread = ${thread.thread}`;
      expect(recorded).toEqual([{ conversation_id: conversationId }]);
      expect((await turnOf(turnId)).status).toBe(ends ? 'ok' : 'running');
    }
  });

  it('neither, when the turn cannot be written', async () => {
    const { turnId, reply } = await aTurn();
    const row = (await insertOutbound(t.database.db, reply('sent')))!;
    const sql = t.database.sql;
    await sql`create or replace function refuse_turn() returns trigger language plpgsql as $$ begin raise exception 'refused'; end $$`;
    await sql`create trigger refuse_turn before update on turns for each row execute function refuse_turn()`;
    try {
      await expect(markOutboundSent(t.database.db, row.id, ['m3'], 1, end)).rejects.toThrow(/refused/);
    } finally {
      await sql`drop trigger refuse_turn on turns`;
    }
    const [ledger] = await sql`select status from outbound_messages where id = ${row.id}`;
    expect(ledger.status).toBe('sending');
    expect(await turnOf(turnId)).toMatchObject({ status: 'running' });
  });
});
