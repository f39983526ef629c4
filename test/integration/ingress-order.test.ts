// A chat's messages are stored in the order they came, even when the database goes away as the first arrives: the
// first waits for it to come back (it was answered with an error, and its platform sent it again after the second,
// which the database, back by then, had stored first: the chat got its answers in the wrong order), and the chat's
// later messages wait behind it.
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHarness, type Harness } from '../support/harness.ts';
import { until } from '../support/until.ts';

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
  h.fake.setDefault(async (req) => ({ text: `echo: ${req.lastUserText}` }));
});
afterAll(() => h?.stop());

/**
 * Storing a message whose text is LIKE `pattern` fails the first `times` times as a restarting database fails it, each
 * failure `holdMs` after the statement reached it. A sequence counts the tries (a failed statement's own writes are
 * rolled back). Returns the number of tries so far, and what undoes it.
 */
async function failStoring(pattern: string, times: number, holdMs = 0) {
  await h.query(sql`create sequence if not exists store_tries`);
  await h.query(sql`create or replace function fail_store() returns trigger language plpgsql as $$
    begin
      if new.content->>'content' like ${sql.raw(`'${pattern}'`)} and nextval('store_tries') <= ${sql.raw(String(times))} then
        perform pg_sleep(${sql.raw(String(holdMs / 1000))});
        raise exception 'the database system is starting up' using errcode = '57P03';
      end if;
      return new;
    end $$`);
  await h.query(sql`create trigger fail_store before insert on messages for each row execute function fail_store()`);
  return {
    tries: async () => Number((await h.query<{ n: string }>(sql`select case when is_called then last_value else 0 end as n from store_tries`))[0].n),
    undo: async () => {
      await h.query(sql`drop trigger fail_store on messages`);
      await h.query(sql`drop sequence store_tries`);
    },
  };
}

const stored = () => h.query<{ text: string }>(sql`select content->>'content' as text from messages where role = 'user' order by id`);

describe("a chat's messages while the database goes away", () => {
  it('are stored in the order they came: the first waits for the database, the next waits behind it, and the answers come in that order', async () => {
    const failing = await failStoring('first%', 2, 100);
    try {
      const first = h.chat.inject({ text: 'first message' });
      // The second comes while the first is waiting for the database, which is back for it.
      await until(async () => (await failing.tries()) >= 1, 5000);
      const second = h.chat.inject({ text: 'second message' });
      expect(await first).toMatchObject({ status: 'queued' });
      expect(await second).toMatchObject({ status: 'queued' });
      expect((await stored()).map((r) => r.text)).toEqual(['first message', 'second message']);
      await h.chat.waitForSent(1, 10_000);
      await h.app.waitForIdle('testy:chat:u1');
      const answers = h.chat.sent.map((m) => m.text).join('\n');
      expect(answers.indexOf('first message')).toBeGreaterThanOrEqual(0);
      expect(answers.indexOf('first message')).toBeLessThan(answers.indexOf('second message'));
    } finally {
      await failing.undo();
    }
  }, 30_000);

  it('hold up no control command of the same chat (/stop)', async () => {
    const failing = await failStoring('held up%', 3, 300);
    try {
      const held = h.chat.inject({ text: 'held up message' });
      await until(async () => (await failing.tries()) >= 1, 5000);
      const started = Date.now();
      expect(await h.chat.inject({ text: '/stop' })).toMatchObject({ status: 'command' });
      expect(Date.now() - started).toBeLessThan(500);
      expect(await held).toMatchObject({ status: 'queued' });
    } finally {
      await failing.undo();
    }
  }, 30_000);

  it('of another chat do not wait behind it', async () => {
    const failing = await failStoring('slow%', 3, 300);
    try {
      const slow = h.chat.inject({ text: 'slow message' });
      await until(async () => (await failing.tries()) >= 1, 5000);
      const started = Date.now();
      expect(await h.chat.inject({ text: 'other chat', chat: { id: 'u2', type: 'dm' }, sender: { id: 'u2', name: 'Bo' } })).toMatchObject({ status: 'queued' });
      expect(Date.now() - started).toBeLessThan(500);
      expect(await slow).toMatchObject({ status: 'queued' });
    } finally {
      await failing.undo();
    }
  }, 30_000);
});
