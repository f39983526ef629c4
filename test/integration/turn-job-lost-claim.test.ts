// A crash of Postgres can lose a turn job's claim after its turn began (the queue's fetch commits without waiting for
// the disk): the job waits in the queue again while the turn runs on, and is handed out again. That second run finds
// the message read; were it to end there, its job's completion would let the conversation's next message be answered
// before the turn still running. It gives the job back instead, and the conversation's order holds.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startHarness, type Harness } from '../support/harness.ts';
import { until } from '../support/until.ts';

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(async () => {
  await h?.stop();
});

it("a job handed out again while its conversation's turn still runs waits for that turn, and the next message waits too", async () => {
  let release!: () => void;
  const held = new Promise<void>((resolve) => (release = resolve));
  h.fake.script(async () => {
    await held;
    return { text: 'first answer' };
  });
  await h.chat.inject({ text: 'first' });
  await until(() => h.fake.requests.length === 1, 'the first model call');
  // The crash: the job the running turn holds waits in the queue again, its message read by the turn.
  const sql = h.db.database.sql;
  const [job] = await sql<{ id: string }[]>`
    update pgboss.job set state = 'created', started_on = null, heartbeat_on = null
    where name = 'turn' and state = 'active' returning id::text`;
  expect(job).toBeDefined();
  // Another process is handed it (this one's may be too, at its next poll).
  const peer = await h.startPeer();
  const state = async () => (await sql<{ state: string }[]>`select state::text from pgboss.job where id = ${job.id}::uuid`)[0]?.state;
  await until(async () => (await state()) === 'retry', 'the job given back to its queue');
  // The conversation's next message waits behind it: nothing is answered before the first turn.
  await h.chat.inject({ text: 'second' });
  await new Promise((r) => setTimeout(r, 2500));
  expect(h.chat.sent.map((m) => m.text)).toEqual([]);
  expect(h.fake.requests).toHaveLength(1);
  release();
  await h.chat.waitForSent(2, 30_000);
  expect(h.chat.sent.map((m) => m.text)).toEqual(['first answer', 'echo: second']);
  await until(async () => (await state()) === 'completed', 'the job completed by its retry');
  await peer.stop();
}, 60_000);
