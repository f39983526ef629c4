// A turn during which the database goes away for a moment (a restart dropping every connection) carries on when it
// is back and answers: it ended with "Sorry, something went wrong" and the person's message unanswered.
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHarness, type Harness } from '../support/harness.ts';

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(() => h?.stop());

/** The model answers `<word>: <message>`; the first time, every connection of the app is dropped while it answers, as a Postgres restart does. */
function answerAfterCuttingOnce(word: string): void {
  let cut = false;
  h.fake.setDefault(async (req) => {
    if (!cut) {
      cut = true;
      await h.query(sql`select pg_terminate_backend(pid) from pg_stat_activity
        where application_name like 'parlor:%' and datname = current_database() and pid <> pg_backend_pid()`);
    }
    return { text: `${word}: ${req.lastUserText}` };
  });
}

/**
 * The ledger row of a message whose text is LIKE `pattern` cannot be written the first time, as if the database went
 * away just then; a sequence counts the tries, since the failed statement's own writes are rolled back. Returns what
 * undoes it.
 */
async function failFirstLedgerWrite(name: string, pattern: string): Promise<() => Promise<void>> {
  const [tries, fn, trigger] = [`${name}_tries`, `${name}_fn`, name].map((n) => sql.raw(n));
  await h.query(sql`create sequence if not exists ${tries}`);
  await h.query(sql`create or replace function ${fn}() returns trigger language plpgsql as $$
    begin
      if new.text like ${sql.raw(`'${pattern}'`)} and nextval('${tries}') = 1 then
        raise exception 'terminating connection due to administrator command' using errcode = '57P01';
      end if;
      return new;
    end $$`);
  await h.query(sql`create trigger ${trigger} before insert on outbound_messages for each row execute function ${fn}()`);
  return () => h.query(sql`drop trigger ${trigger} on outbound_messages`).then(() => undefined);
}

/** The person sends `text`; what the chat gets: `count` messages, and whatever more came a second after the turn ended. */
async function answersTo(text: string, count: number): Promise<string[]> {
  const before = h.chat.sent.length;
  await h.chat.inject({ text });
  await h.chat.waitForSent(before + count, 20_000);
  await h.app.waitForIdle('testy:chat:u1');
  await new Promise((r) => setTimeout(r, 1000));
  return h.chat.sent.slice(before).map((m) => m.text);
}

describe('the database going away during a turn', () => {
  it('the turn carries on when it is back, and the person gets one answer and no apology', async () => {
    answerAfterCuttingOnce('echo');
    await h.chat.inject({ text: 'are you there' });
    await h.chat.waitForSent(1, 20_000);
    await h.app.waitForIdle('testy:chat:u1');
    await new Promise((r) => setTimeout(r, 1000));
    expect(h.chat.sent.map((m) => m.text)).toEqual(['echo: are you there']);
    const turns = await h.query<{ status: string }>(sql`select status from turns where kind = 'user'`);
    expect(turns.map((t) => t.status)).toEqual(['ok']);
  }, 40_000);

  it('the turn carries on within seconds even when the queue cannot take its job back meanwhile (as while Postgres restarts)', async () => {
    // A Postgres restart drops every connection and refuses new ones for a while: a turn that gave its job back to the
    // queue at once found the queue's connections gone too, and the job waited for its heartbeat to run out (half a
    // minute and more) before anyone ran it. Here the queue cannot take the job back at all; the turn must not need it.
    await h.query(sql`create or replace function blip_turn_job() returns trigger language plpgsql as $$
      begin
        if old.name = 'turn' and old.state = 'active' then
          raise exception 'terminating connection due to administrator command' using errcode = '57P01';
        end if;
        return old;
      end $$`);
    await h.query(sql`create trigger blip_turn_job before delete on pgboss.job for each row execute function blip_turn_job()`);
    try {
      answerAfterCuttingOnce('back');
      const before = h.chat.sent.length;
      await h.chat.inject({ text: 'hello again' });
      await h.chat.waitForSent(before + 1, 10_000);
      await h.app.waitForIdle('testy:chat:u1');
      expect(h.chat.sent.slice(before).map((m) => m.text)).toEqual(['back: hello again']);
    } finally {
      await h.query(sql`drop trigger blip_turn_job on pgboss.job`);
    }
  }, 40_000);

  it('a turn that had answered when the database went away sends that answer, and does not ask the model again', async () => {
    // The reply's row in the ledger cannot be written once (as if the database went away between the answer and it).
    const undo = await failFirstLedgerWrite('blip_answer', 'answer %');
    try {
      let calls = 0;
      h.fake.setDefault((req) => ({ text: `answer ${++calls}: ${req.lastUserText}` }));
      expect(await answersTo('still there', 1)).toEqual(['answer 1: still there']);
      expect(calls).toBe(1);
    } finally {
      await undo();
    }
  }, 40_000);

  it("a reminder's reply that fails while the database is away goes out once it is back, once, and the model is not told it failed", async () => {
    // The reply's row in the ledger cannot be written the first time (the database went away as reply_to_origin ran).
    const undo = await failFirstLedgerWrite('blip_reply', 'time to stretch');
    try {
      const results: string[] = [];
      h.fake.setDefault((req) => {
        const messages: { role: string; content: unknown }[] = req.body.messages;
        const last = messages[messages.length - 1];
        if (req.lastUserText.startsWith('[reminder')) {
          if (last.role !== 'tool') return { toolCalls: [{ name: 'reply_to_origin', arguments: { text: 'time to stretch' } }] };
          results.push(String(last.content));
          return { toolCalls: [{ name: 'end_task', arguments: { status: 'ok' } }] };
        }
        if (last.role === 'tool') return { text: 'I will remind you.' };
        return { toolCalls: [{ name: 'remind', arguments: { action: 'remind', name: 'stretch', prompt: 'stretch', in_seconds: 1 } }] };
      });
      expect(await answersTo('remind me in a second', 2)).toEqual(['I will remind you.', 'time to stretch']);
      expect(results).toHaveLength(1);
      expect(results[0]).not.toMatch(/crashed|failed/);
    } finally {
      await undo();
    }
  }, 40_000);

  it('a message send_message sends while the database is away goes out once it is back, once', async () => {
    const undo = await failFirstLedgerWrite('blip_send', 'a note now');
    try {
      const results: string[] = [];
      h.fake.setDefault((req) => {
        const messages: { role: string; content: unknown }[] = req.body.messages;
        const last = messages[messages.length - 1];
        if (last.role !== 'tool') return { toolCalls: [{ name: 'send_message', arguments: { text: 'a note now' } }] };
        results.push(String(last.content));
        return { text: 'done' };
      });
      expect(await answersTo('send me a note', 2)).toEqual(['a note now', 'done']);
      expect(results).toHaveLength(1);
      expect(results[0]).not.toMatch(/crashed|failed/);
    } finally {
      await undo();
    }
  }, 40_000);

  it('a turn whose start the database lost (a crash before its asynchronous commit reached the disk) sends nothing, and the message is answered once', async () => {
    let calls = 0;
    h.fake.setDefault(async (req) => {
      if (++calls === 1) {
        // What a crash of Postgres leaves: the message back in waiting, the turn that claimed it never written.
        await h.query(sql`with lost as (delete from turns where conversation_id = 'testy:chat:u1' and status = 'running' returning id)
          update messages set turn_id = null where turn_id in (select id from lost) and role = 'user'`);
      }
      return { text: `answer ${calls}: ${req.lastUserText}` };
    });
    expect(await answersTo('lost start', 1)).toEqual(['answer 2: lost start']);
    expect(calls).toBe(2);
    const answered = await h.query<{ n: number }>(sql`select count(*)::int as n from messages where conversation_id = 'testy:chat:u1' and content->>'content' like 'answer _: lost start'`);
    expect(answered[0].n).toBe(1);
  }, 40_000);
});
