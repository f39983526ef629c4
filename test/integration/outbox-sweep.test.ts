import { afterAll, beforeAll, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { startHarness, type Harness } from '../support/harness.ts';

// A message a dead process left 'sending' holds its chat's later messages behind it: it is taken over within two
// sweeps of the outbox (every 10 s by default), not at the minute-long housekeeping pass.
let h: Harness;
beforeAll(async () => {
  h = await startHarness({ app: { goneSweepMs: 400 } });
});
afterAll(async () => {
  await h?.stop();
});

it('sends a message a dead process left sending, and the next one of its chat after it, within two sweeps', async () => {
  await h.query(sql`insert into outbound_messages (dedupe_key, connector, chat, text, status, claimed_at, claimed_by)
                    values ('abandoned', 'chat', 'u1', 'message abandoned', 'sending', now(), 'parlor:1:dead')`);
  // The chat's next message waits behind the abandoned one.
  expect(await h.app.delivery.deliver({ dedupeKey: 'next', connector: 'chat', chat: 'u1', text: 'message next' })).toEqual({ status: 'queued' });
  const started = Date.now();
  await h.chat.waitForSent(2);
  expect(Date.now() - started).toBeLessThan(5000);
  expect(h.chat.sent.map((m) => m.text)).toEqual(['message abandoned', 'message next']);
  // Each once.
  await new Promise((r) => setTimeout(r, 1500));
  expect(h.chat.sent.map((m) => m.text)).toEqual(['message abandoned', 'message next']);
});
