// A click made while the database restarts is recorded when it is back: it was answered "Sorry, that click could
// not be recorded; please try again in a moment", and the person had to click again.
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHarness, type Harness } from '../support/harness.ts';

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ connector: { buttons: true } });
});
afterAll(() => h?.stop());

/** For `ms` from now, every statement that touches a question fails as a restarting server's connections do. */
async function questionsAwayFor(ms: number): Promise<void> {
  await h.query(sql`create table if not exists blip_until (until timestamptz not null)`);
  await h.query(sql`delete from blip_until`);
  await h.query(sql`insert into blip_until values (now() + ${`${ms} milliseconds`}::interval)`);
  await h.query(sql`create or replace function blip_questions() returns trigger language plpgsql as $$
    begin
      if exists (select 1 from blip_until where clock_timestamp() < until) then
        raise exception 'terminating connection due to administrator command' using errcode = '57P01';
      end if;
      return new;
    end $$`);
  await h.query(sql`drop trigger if exists blip_questions on questions`);
  await h.query(sql`create trigger blip_questions before update on questions for each row execute function blip_questions()`);
}

describe('a click while the database is away', () => {
  it('is recorded once the database is back, and the person is told so', async () => {
    h.fake.script({ toolCalls: [{ name: 'ask_user', arguments: { question: 'Ship it?', choices: ['Yes', 'No'] } }] }, { text: 'shipping' });
    await h.chat.inject({ text: 'ready?' });
    const [question] = await h.chat.waitForSent(1);
    const yes = question.buttons![0][0];
    await questionsAwayFor(1500);
    const started = Date.now();
    const result = await h.chat.inject({ kind: 'click', text: '', data: yes.data, messageId: 'out-1' });
    expect(Date.now() - started).toBeGreaterThanOrEqual(1000);
    expect(result).toMatchObject({ status: 'click', notice: 'Answer recorded: Yes' });
    await h.chat.waitForSent(2);
    expect(h.chat.sent.at(-1)?.text).toBe('shipping');
    await h.app.waitForIdle('testy:chat:u1');
    const rows = await h.query<{ status: string }>(sql`select status from questions`);
    expect(rows.map((r) => r.status)).toEqual(['answered']);
  }, 40_000);

  it('a click that fails for another reason is not tried again', async () => {
    h.fake.script({ toolCalls: [{ name: 'ask_user', arguments: { question: 'Again?', choices: ['Yes', 'No'] } }] }, { text: 'fine' });
    const before = h.chat.sent.length;
    await h.chat.inject({ text: 'once more' });
    const [question] = (await h.chat.waitForSent(before + 1)).slice(before);
    await h.query(sql`create or replace function blip_questions() returns trigger language plpgsql as $$
      begin
        raise exception 'no such thing' using errcode = 'P0001';
      end $$`);
    const started = Date.now();
    await expect(h.chat.inject({ kind: 'click', text: '', data: question.buttons![0][0].data, messageId: 'out-2' })).rejects.toThrow();
    expect(Date.now() - started).toBeLessThan(1000);
    await h.query(sql`drop trigger blip_questions on questions`);
    await h.chat.inject({ kind: 'click', text: '', data: question.buttons![0][0].data, messageId: 'out-2' });
    await h.app.waitForIdle('testy:chat:u1');
  }, 40_000);
});
