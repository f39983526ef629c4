// A reminder's firing job held by a process that died a moment after taking it (its heartbeat stopped) is handed out
// again within seconds and fires once: it waited for the job to expire, five minutes late.
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHarness, TEST_PERSONA, type Harness } from '../support/harness.ts';

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ personas: { testy: TEST_PERSONA } });
});
afterAll(() => h?.stop());

describe('a reminder taken by a process that died', () => {
  it('fires within seconds, once', async () => {
    h.fake.setDefault((req) => {
      const messages: { role: string }[] = req.body.messages;
      const last = messages[messages.length - 1];
      if (req.lastUserText.startsWith('[reminder')) {
        if (last.role === 'tool') return { toolCalls: [{ name: 'end_task', arguments: { status: 'ok' } }] };
        return { toolCalls: [{ name: 'reply_to_origin', arguments: { text: 'time to stretch' } }] };
      }
      if (last.role === 'tool') return { text: 'I will remind you.' };
      return { toolCalls: [{ name: 'remind', arguments: { action: 'remind', name: 'stretch', prompt: 'stretch', in_seconds: 600 } }] };
    });
    await h.chat.inject({ text: 'remind me in ten minutes' });
    await h.chat.waitForSent(1);
    // A process took the firing as it fell due, and died: the job is active, its heartbeat a few seconds old.
    await h.query(sql`update reminders set due_at = now() where name = 'stretch'`);
    const taken = await h.query<{ id: string }>(sql`
      update pgboss.job set state = 'active', start_after = now(), started_on = now(), heartbeat_on = now() - interval '5 seconds'
      where name = 'reminder' and state = 'created' returning id`);
    expect(taken).toHaveLength(1);
    const started = Date.now();
    await h.chat.waitForSent(2, 45_000);
    expect(h.chat.sent[1].text).toBe('time to stretch');
    expect(Date.now() - started).toBeLessThan(45_000);
    await new Promise((r) => setTimeout(r, 1500));
    expect(h.chat.sent.filter((m) => m.text === 'time to stretch')).toHaveLength(1);
    await h.app.waitForIdle('testy:chat:u1');
  }, 60_000);
});
