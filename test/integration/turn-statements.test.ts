// What a direct message costs Postgres in statements, counted on the wire between Parlor and the server.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHarness, type Harness } from '../support/harness.ts';
import { startStatementProxy, type StatementProxy, type Trip } from '../support/statement-proxy.ts';

let h: Harness;
let proxy: StatementProxy;

beforeAll(async () => {
  h = await startHarness({
    reachDatabase: async (url) => (proxy = await startStatementProxy(url)).url,
    // Nothing in the background while the messages are counted: the outbox is swept by notification alone.
    app: { goneSweepMs: 10 * 60_000 },
  });
});
afterAll(async () => {
  await h?.stop();
  await proxy?.close();
});

/**
 * One DM, answered, its turn ended and its job completed (read past the proxy), so no statement of it is left to come.
 * Two chats take turns, as isolated DMs of several people do: a DM in the chat whose turn is just ending (its job
 * completed with its reply, the workers not yet told) would wait for a fetch instead of starting in the same trip.
 */
let dms = 0;
async function dm(text: string) {
  const before = h.chat.sent.length;
  const chat = dms++ % 2 ? 'u2' : 'u1';
  await h.chat.inject({ text, chat: { id: chat, type: 'dm' }, sender: { id: chat, name: 'Ana' } });
  await h.chat.waitForSent(before + 1, 10_000);
  for (const deadline = Date.now() + 10_000; Date.now() < deadline; ) {
    const [row] = await h.db.database.sql`select
      (select count(*)::int from turns where status = 'running') + (select count(*)::int from pgboss.job where name = 'turn' and state < 'completed') as open`;
    if (row.open === 0) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error('the turn did not end, or its job was not completed');
}

// The tables a message passes through (sweeps in the background touch others).
const own = /\b(inbound_events|conversations|messages|turns|outbound_messages|user_models)\b/;
// The outbox's sweep (every 2 s) claims what other processes queued: it runs whatever messages come, so it is no
// message's statement, and is counted on its own.
const outboxSweep = /^update "outbound_messages" set "status" = \$1, "claimed_at" = now\(\)/;
const onMessageTables = (text: string) => !/^\s*(INSERT|WITH|SELECT|UPDATE|DELETE)\b.*\bpgboss\./.test(text) && own.test(text) && !outboxSweep.test(text);
// The queue's slow poll (every 2 s) can fetch a job between its message's commit and the turn's start right behind it:
// that start takes nothing, and the fetched job's turn begins with a start of its own, one statement more.
const fetchedStart = /^with job as \(\s*select null::uuid as id where false/;

describe('statements of a direct message', () => {
  it("are few: the message stored, the turn begun with its history and the person's model, its answer stored and sent, its end recorded", async () => {
    await dm('warm 1');
    await dm('warm 2');
    // Every connection of the pool open, as under load.
    await Promise.all(Array.from({ length: 12 }, () => h.app.database.sql`select pg_sleep(0.05)`));
    const from = proxy.executed.length;
    const began = Date.now();
    // A statement's first use on a pool connection is sent alone, to learn its parameter types, which splits the trip it
    // is in (see Trip): the round trips are checked on messages whose statements were all prepared on their connections.
    // The pool opens connections as it needs them and takes them in turn, so messages go on until ten such.
    const prepared: Trip[][] = [];
    let messages = 0;
    while (prepared.length < 10 && messages < 60) {
      const fromTrip = proxy.trips.length;
      await dm(`hello ${messages++}`);
      const trips = proxy.trips.slice(fromTrip);
      const fetched = trips.some((trip) => trip.statements.some((text) => fetchedStart.test(text)));
      if (!fetched && !trips.some((trip) => trip.prepared.some(onMessageTables))) prepared.push(trips);
    }
    expect(prepared).toHaveLength(10);
    const polls = Math.ceil((Date.now() - began) / 2000);
    const statements = proxy.executed.slice(from);
    const ownStatements = statements.filter(onMessageTables);
    const count = (pattern: RegExp) => ownStatements.filter((text) => pattern.test(text)).length / messages;
    const fetched = ownStatements.filter((text) => fetchedStart.test(text)).length;
    // The message, its event, its conversation and its turn's job.
    expect(count(/^with open_question as .*insert into messages .*insert into pgboss\.job /)).toBe(1);
    // The turn begins: its job taken from the queue (no fetch), its messages claimed, its history and what it knows of
    // the person read, in one statement.
    expect(count(/^with job as \( update pgboss\.job .*insert into turns.* history as.*from user_models/)).toBe(1);
    expect(count(/from user_models/)).toBe(1 + fetched / messages);
    // The answer in the transcript and the ledger together; the sent mark, the turn's end and its job's completion
    // together.
    expect(count(/insert into outbound_messages.*insert into messages/)).toBe(1);
    expect(count(/update outbound_messages set status = 'sent'.*update turns.*update pgboss\.job set completed_on/)).toBe(1);
    expect(ownStatements.length).toBe(4 * messages + fetched);
    // Rare: the poll must come within the moment between the two.
    expect(fetched).toBeLessThanOrEqual(2);
    expect(statements.filter((text) => outboxSweep.test(text)).length).toBeLessThanOrEqual(polls + 1);
    // Round trips: BEGIN, the message, its COMMIT and the turn's start right behind it go out in one write; each of the
    // others is a statement of its own. So three trips: the message with the turn's start, the answer before it is
    // sent, the sent mark with the turn's end.
    for (const trips of prepared) {
      const ingress = trips.filter((trip) => trip.statements.some((text) => /^with open_question as/.test(text)));
      expect(ingress.map((trip) => trip.statements.map((text) => text.split(' ').slice(0, 3).join(' ')))).toEqual([['begin', 'with open_question as', 'commit', 'with job as']]);
      expect(trips.filter((trip) => trip.statements.some(onMessageTables))).toHaveLength(3);
    }
    // The queue: the job written with the message, taken by the turn's start and completed with the sent mark, so never
    // sent or completed by the queue's own statements, and fetched only by the slow poll (every 2 s).
    const queue = (pattern: RegExp) => statements.filter((text) => /\bpgboss\./.test(text) && pattern.test(text)).length;
    expect(queue(/^INSERT INTO pgboss\.job/)).toBe(0);
    expect(queue(/^WITH results AS \( UPDATE pgboss\.job\w* SET completed_on/)).toBe(0);
    const [completed] = await h.db.database.sql`select count(*)::int as n from pgboss.job where name = 'turn' and state = 'completed'`;
    expect(completed.n).toBe(messages + 2);
    expect(queue(/strict_fifo_heads/)).toBeLessThanOrEqual(polls + 1);
  }, 120_000);
});
