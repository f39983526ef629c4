// Which typed messages answer an open ask_user question, and which stay ordinary messages.
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createBuiltinTools } from '../../tools/index.ts';
import { startHarness, TEST_PERSONA, type Harness } from '../support/harness.ts';
import { createRecordingConnector, type RecordingConnector } from '../support/recording-connector.ts';

let h: Harness;
let chat: RecordingConnector;
const GROUP = { id: 'g2', type: 'group' as const };

beforeAll(async () => {
  chat = createRecordingConnector('chat', { buttons: true });
  h = await startHarness({
    personas: { testy: { ...TEST_PERSONA, connectors: { ...(TEST_PERSONA.connectors as object), approvers: ['chat:u1'] } } },
    app: { connectors: () => [chat], tools: createBuiltinTools({ timezone: 'UTC' }), questionSweepMs: 200 },
  });
});
afterAll(() => h?.stop());
beforeEach(() => {
  h.fake.reset();
  chat.sent.length = 0;
});

const openAsks = async () =>
  (await h.query<{ n: number }>(sql`select count(*)::int as n from questions where kind = 'ask' and status = 'pending'`))[0].n;

/** Ana asks in the group; the model asks her back with ask_user. */
async function askInGroup() {
  h.fake.script({ toolCalls: [{ name: 'ask_user', arguments: { question: 'Which day?' } }] });
  await chat.inject({ text: 'plan it', chat: GROUP, sender: { id: 'u1', name: 'Ana' } });
  await chat.waitForSent(chat.sent.length + 1);
  await h.app.waitForIdle('testy:chat:g2');
  expect(await openAsks()).toBe(1);
}

describe('typed answers', () => {
  it('in a group, only the person asked answers by typing; others are ordinary messages', async () => {
    await askInGroup();
    h.fake.script((req) => ({ text: `seen: ${req.lastUserText}` }));
    const bo = await chat.inject({ text: 'friday!', chat: GROUP, sender: { id: 'u2', name: 'Bo' } });
    expect(bo.status).toBe('queued');
    await h.app.waitForIdle('testy:chat:g2');
    expect(await openAsks()).toBe(1);

    h.fake.script((req) => ({ text: `answer: ${req.lastUserText}` }));
    const ana = await chat.inject({ text: 'saturday', chat: GROUP, sender: { id: 'u1', name: 'Ana' } });
    expect(ana.status).toBe('click');
    await h.app.waitForIdle('testy:chat:g2');
    expect(await openAsks()).toBe(0);
    expect(chat.sent.at(-1)!.text).toMatch(/^answer: \[answer to Q#[\w-]{6} "Which day\?" \(via chat:g2:m-\d+ by Ana\)\]\nsaturday$/);
  });

  it('a command or a message with files is never taken as the answer', async () => {
    await askInGroup();
    const status = await chat.inject({ text: '/status', chat: GROUP, sender: { id: 'u1', name: 'Ana' } });
    expect(status.status).toBe('command');
    h.fake.script({ text: 'nice photo' });
    const photo = await chat.inject({ text: 'this one', chat: GROUP, sender: { id: 'u1', name: 'Ana' }, attachments: [{ type: 'photo' }] });
    expect(photo.status).toBe('queued');
    await h.app.waitForIdle('testy:chat:g2');
    expect(await openAsks()).toBe(1);
    await h.query(sql`update questions set status = 'expired' where kind = 'ask' and status = 'pending'`);
  });

  it('a reply that loses the race to a click is an ordinary message, not lost', async () => {
    await askInGroup();
    // The click lands between the typed reply's lookup and its answer: a trigger makes the reply's update find
    // nothing to change, as it would had the click committed first.
    await h.query(sql`create or replace function lose_typed_race() returns trigger language plpgsql as $$
      begin if new.answered_via like 'via %' then return null; end if; return new; end $$`);
    await h.query(sql`create trigger lose_typed_race before update on questions for each row execute function lose_typed_race()`);
    try {
      h.fake.script((req) => ({ text: `seen: ${req.lastUserText}` }));
      const late = await chat.inject({ text: 'monday', chat: GROUP, sender: { id: 'u1', name: 'Ana' } });
      expect(late.status).toBe('queued');
      await h.app.waitForIdle('testy:chat:g2');
      expect(chat.sent.at(-1)!.text).toBe('seen: [Ana (chat:u1)] monday');
    } finally {
      await h.query(sql`drop trigger lose_typed_race on questions`);
    }
  });

  it('the turn an answer starts knows who answered: a question it asks is theirs to answer', async () => {
    await askInGroup();
    h.fake.script({ toolCalls: [{ name: 'ask_user', arguments: { question: 'Morning or evening?' } }] });
    await chat.inject({ text: 'sunday', chat: GROUP, sender: { id: 'u1', name: 'Ana' } });
    await h.app.waitForIdle('testy:chat:g2');
    const [follow] = await h.query<{ asked_user: string }>(sql`select asked_user from questions where status = 'pending' and text like '%Morning or evening%'`);
    expect(follow.asked_user).toBe('chat:u1');
    await h.query(sql`update questions set status = 'expired' where status = 'pending'`);
  });
});
