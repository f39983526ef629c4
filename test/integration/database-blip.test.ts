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

describe('the database going away during a turn', () => {
  it('the turn carries on when it is back, and the person gets one answer and no apology', async () => {
    let cut = false;
    h.fake.setDefault(async (req) => {
      if (!cut) {
        cut = true;
        // Every connection of the app is dropped while the model is answering, as a Postgres restart does.
        await h.query(sql`select pg_terminate_backend(pid) from pg_stat_activity
          where application_name like 'parlor:%' and datname = current_database() and pid <> pg_backend_pid()`);
      }
      return { text: `echo: ${req.lastUserText}` };
    });
    await h.chat.inject({ text: 'are you there' });
    await h.chat.waitForSent(1, 20_000);
    await h.app.waitForIdle('testy:chat:u1');
    await new Promise((r) => setTimeout(r, 1000));
    expect(h.chat.sent.map((m) => m.text)).toEqual(['echo: are you there']);
    const turns = await h.query<{ status: string }>(sql`select status from turns where kind = 'user'`);
    expect(turns.map((t) => t.status)).toEqual(['ok']);
  }, 40_000);
});
