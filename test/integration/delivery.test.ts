import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import postgres from 'postgres';
import { PlatformError, type Connector } from '../../src/connector.ts';
import pino from 'pino';
import { createDelivery } from '../../src/agent/delivery.ts';
import { startHarness, type Harness } from '../support/harness.ts';
import { createRecordingConnector } from '../support/recording-connector.ts';
import { until } from '../support/until.ts';

let h: Harness;
beforeAll(async () => {
  // Maintenance runs here only when a test asks for a pass.
  h = await startHarness({ app: { goneSweepMs: 3_600_000 } });
});
afterAll(async () => {
  await h?.stop();
});
beforeEach(async () => {
  // What the test before sent is recorded first (its sent mark commits a moment after the platform has it): a
  // message of the chat still open would hold the next test's first message behind it.
  await until(async () => (await h.query(sql`select 1 from outbound_messages where status in ('pending', 'sending')`)).length === 0, 'the outbox to settle');
  h.chat.sent.length = 0;
});

const draft = (key: string) => ({ dedupeKey: key, connector: 'chat', chat: 'u1', text: `message ${key}` });

describe('the outbound ledger', () => {
  it('sends a key once, however often it is delivered', async () => {
    expect(await h.app.delivery.deliver(draft('once'))).toMatchObject({ status: 'sent' });
    expect(await h.app.delivery.deliver(draft('once'))).toEqual({ status: 'duplicate' });
    expect(h.chat.sent).toHaveLength(1);
  });

  it('lets a later attempt send a message whose earlier attempt failed for good', async () => {
    h.chat.failNext(1, new PlatformError({ platform: 'chat', method: 'send', status: 400, message: 'bad request' }));
    expect(await h.app.delivery.deliver(draft('retry-later'))).toMatchObject({ status: 'failed', error: expect.stringContaining('bad request') });
    expect(await h.app.delivery.deliver(draft('retry-later'))).toMatchObject({ status: 'sent' });
    expect(h.chat.sent.map((m) => m.text)).toEqual(['message retry-later']);
  });

  it.each([
    ['a second ago', '1 second'],
    ['20 minutes ago', '20 minutes'],
  ])('sends once again a message left "sending" by a dead process (claimed %s), never counting it as delivered', async (_label, age) => {
    const key = `orphan-${age.replace(' ', '-')}`;
    await h.query(sql`insert into outbound_messages (dedupe_key, connector, chat, text, status, claimed_at, claimed_by)
                      values (${key}, 'chat', 'u1', ${`message ${key}`}, 'sending', now() - ${age}::interval, 'parlor:1:dead')`);
    expect(await h.app.delivery.deliver(draft(key))).toMatchObject({ status: 'sent' });
    expect(await h.app.delivery.deliver(draft(key))).toEqual({ status: 'duplicate' });
    expect(h.chat.sent.map((m) => m.text)).toEqual([`message ${key}`]);
    const [row] = await h.query<{ status: string; claimed_by: string }>(sql`select status, claimed_by from outbound_messages where dedupe_key = ${key}`);
    expect(row).toEqual({ status: 'sent', claimed_by: h.app.database.applicationName });
  });

  it('a sender whose sessions vanish for a moment (a database blip) is looked for again before its message is taken over', async () => {
    await h.query(sql`insert into outbound_messages (dedupe_key, connector, chat, text, status, claimed_at, claimed_by)
                      values ('blip', 'chat', 'u1', 'message blip', 'sending', now(), 'parlor:blip:alive')`);
    const delivered = h.app.delivery.deliver(draft('blip'));
    // The sender's connection comes back a second later, as a pool does after a blip.
    await new Promise((r) => setTimeout(r, 1000));
    const back = postgres(h.db.url, { max: 1, connection: { application_name: 'parlor:blip:alive' }, onnotice: () => {} });
    await back`select 1`;
    await new Promise((r) => setTimeout(r, 3000));
    await h.query(sql`update outbound_messages set status = 'sent' where dedupe_key = 'blip'`);
    expect(await delivered).toEqual({ status: 'duplicate' });
    expect(h.chat.sent).toHaveLength(0);
    await back.end();
  });

  it('waits for a message a live process is still sending, and does not send it twice', async () => {
    await h.query(sql`insert into outbound_messages (dedupe_key, connector, chat, text, status, claimed_at, claimed_by)
                      values ('in-flight', 'chat', 'u1', 'message in-flight', 'sending', now(), ${h.app.database.applicationName})`);
    const delivered = h.app.delivery.deliver(draft('in-flight'));
    await new Promise((r) => setTimeout(r, 600));
    await h.query(sql`update outbound_messages set status = 'sent' where dedupe_key = 'in-flight'`);
    expect(await delivered).toEqual({ status: 'duplicate' });
    expect(h.chat.sent).toHaveLength(0);
  });

  it("waits behind the chat's message still being sent (a 429 can hold it for seconds), and goes out after it", async () => {
    await h.query(sql`insert into outbound_messages (dedupe_key, connector, chat, text, status, claimed_at, claimed_by)
                      values ('held', 'chat', 'u1', 'message held', 'sending', now(), ${h.app.database.applicationName})`);
    // Another chat is not held by it.
    expect(await h.app.delivery.deliver({ ...draft('elsewhere'), chat: 'u2' })).toMatchObject({ status: 'sent' });
    expect(await h.app.delivery.deliver(draft('behind'))).toEqual({ status: 'queued' });
    await new Promise((r) => setTimeout(r, 2500));
    expect(h.chat.sent.map((m) => m.text)).toEqual(['message elsewhere']);
    await h.query(sql`update outbound_messages set status = 'sent', sent_at = now() where dedupe_key = 'held'`);
    await h.chat.waitForSent(2, 5000);
    expect(h.chat.sent.map((m) => m.text)).toEqual(['message elsewhere', 'message behind']);
  });

  it('records a send the platform took though the database went away at that moment, and the chat goes on', async () => {
    // The app's connections are cut just after the platform has the message: the sent mark's first try fails.
    h.chat.afterSend = async () => {
      h.chat.afterSend = undefined;
      await h.query(sql`select pg_terminate_backend(pid) from pg_stat_activity where application_name = ${h.app.database.applicationName} and pid <> pg_backend_pid()`);
    };
    expect(await h.app.delivery.deliver(draft('through-a-restart'))).toMatchObject({ status: 'sent' });
    const [row] = await h.query<{ status: string }>(sql`select status from outbound_messages where dedupe_key = 'through-a-restart'`);
    expect(row.status).toBe('sent');
    expect(await h.app.delivery.deliver(draft('next-in-chat'))).toMatchObject({ status: 'sent' });
    expect(h.chat.sent.map((m) => m.text)).toEqual(['message through-a-restart', 'message next-in-chat']);
  });

  it('sends a message whose sender died once it is seen gone twice by maintenance, even if nobody delivers it again', async () => {
    await h.query(sql`insert into outbound_messages (dedupe_key, connector, chat, text, status, claimed_at, claimed_by)
                      values ('abandoned', 'chat', 'u1', 'message abandoned', 'sending', now(), 'parlor:1:dead')`);
    await h.app.maintenance!.runOnce();
    // One pass only marks it suspect: a database blip must not look like a death.
    await new Promise((r) => setTimeout(r, 300));
    expect(h.chat.sent).toHaveLength(0);
    await h.app.maintenance!.runOnce();
    await h.chat.waitForSent(1);
    await new Promise((r) => setTimeout(r, 2500));
    expect(h.chat.sent.map((m) => m.text)).toEqual(['message abandoned']);
  });

  it('a message settled again by its turn (after a restart) waits behind an earlier open message of its chat', async () => {
    // An earlier message of the chat, being sent by a live process (this one's session), and a later one pending.
    await h.query(sql`insert into outbound_messages (dedupe_key, connector, chat, text, status, claimed_at, claimed_by)
                      values ('earlier', 'chat', 'u1', 'message earlier', 'sending', now(), ${h.app.database.applicationName})`);
    await h.query(sql`insert into outbound_messages (dedupe_key, connector, chat, text, status) values ('later', 'chat', 'u1', 'message later', 'pending')`);
    // The later one's turn resumes and settles it: it is not sent ahead of the earlier one.
    expect(await h.app.delivery.deliver(draft('later'))).toEqual({ status: 'queued' });
    await new Promise((r) => setTimeout(r, 500));
    expect(h.chat.sent).toHaveLength(0);
    // Once the earlier one is sent, the outbox sends the later one.
    await h.query(sql`update outbound_messages set status = 'sent', sent_at = now() where dedupe_key = 'earlier'`);
    await h.chat.waitForSent(1);
    expect(h.chat.sent.map((m) => m.text)).toEqual(['message later']);
  });

  it('queues for a connector running in another process, which sends it', async () => {
    const peer = await h.startPeer({ connectors: () => [], worker: false });
    expect(await peer.delivery.deliver({ ...draft('from-peer'), conversationId: 'testy:chat:u1' })).toEqual({ status: 'queued' });
    await h.chat.waitForSent(1);
    expect(h.chat.sent[0].text).toBe('message from-peer');
    await h.app.waitForIdle('testy:chat:u1');
  });
});

describe('maintenance', () => {
  it('fails a turn left running with no live job, so the conversation does not look busy forever', async () => {
    await h.query(sql`insert into conversations (id, persona) values ('testy:chat:lost', 'testy') on conflict do nothing`);
    await h.query(sql`insert into turns (id, conversation_id, kind, status, job_id, started_at)
                      values (gen_random_uuid(), 'testy:chat:lost', 'user', 'running', gen_random_uuid()::text, now() - interval '1 hour')`);
    await h.app.maintenance!.runOnce();
    const [turn] = await h.query<{ status: string }>(sql`select status from turns where conversation_id = 'testy:chat:lost'`);
    expect(turn.status).toBe('failed');
    await h.app.waitForIdle('testy:chat:lost', 2000);
  });
});

describe('a send of a process that may have been fenced', () => {
  /** A delivery of its own through the connector `held`, waiting for `beforeAct` as a process's heartbeat has it. */
  const heldDelivery = (connector: Connector, beforeAct: () => Promise<void>) =>
    createDelivery({
      db: h.app.database.db,
      sql: h.app.database.sql,
      session: h.app.database.applicationName,
      connectors: new Map([['held', connector]]),
      knownConnectors: () => ['held'],
      log: pino({ level: 'silent' }),
      beforeAct,
    });

  it('waits for beforeAct before "typing…": a fenced process shows nothing', async () => {
    const connector = createRecordingConnector('held', { typing: true });
    const waiting: (() => void)[] = [];
    const delivery = heldDelivery(connector, () => new Promise<void>((resolve) => waiting.push(resolve)));
    const shown = delivery.typing({ connector: 'held', chat: 'u9' });
    await until(() => waiting.length === 1, 'typing to ask');
    await new Promise((r) => setTimeout(r, 100));
    expect(connector.typings).toEqual([]);
    waiting[0]();
    await shown;
    expect(connector.typings).toEqual([{ chat: 'u9' }]);
  });

  it('waits for beforeAct before each attempt: a process fenced between two tries of a send tries no more', async () => {
    const connector = createRecordingConnector('held');
    connector.failNext(1, new PlatformError({ platform: 'held', method: 'send', status: 502, message: 'bad gateway' }));
    let opened = true;
    let asked = 0;
    const waiting: (() => void)[] = [];
    const delivery = heldDelivery(connector, () => {
      asked++;
      // The first try goes; the process stops before the next, and is found fenced when it runs again.
      if (opened) {
        opened = false;
        return Promise.resolve();
      }
      return new Promise<void>((resolve) => waiting.push(resolve));
    });
    void delivery.deliver({ dedupeKey: 'fenced-between-tries', connector: 'held', chat: 'u9', text: 'once at most' });
    await until(() => asked === 2, 'the second try to ask');
    await new Promise((r) => setTimeout(r, 300));
    expect(connector.sent).toEqual([]);
    expect(waiting).toHaveLength(1);
  });

});
