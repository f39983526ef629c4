import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, beforeEach, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { OWNER, OWNER_DM, TEAM, startSlackHarness, type SlackHarness } from './slack-harness.ts';
import { until } from '../support/until.ts';

// Slack takes no idempotency key, so each part Parlor posts carries its outbound row's key in the message metadata.
// A resend (a retry whose earlier answer was lost, or a row taken over from a process that died sending it) looks
// in the chat first and posts only what is not there.
let h: SlackHarness;
beforeAll(async () => {
  h = await startSlackHarness({ mode: 'socket' });
});
afterAll(async () => {
  await h?.stop();
});
beforeEach(async () => {
  await until(async () => (await h.app.database.db.execute(sql`select 1 from outbound_messages where status in ('pending', 'sending')`)).length === 0, 'the outbox to settle');
});

const posts = () => h.fake.callsOf('chat.postMessage').length;

it('posts each part with its key, and a resend of a message Slack has posts nothing and answers with its ids', async () => {
  const before = posts();
  const first = await h.connector.send({ chat: OWNER, text: 'keyed hello', key: 'outbound:9001' });
  const again = await h.connector.send({ chat: OWNER, text: 'keyed hello', key: 'outbound:9001', resend: true });
  expect(again.ids).toEqual(first.ids);
  expect(posts() - before).toBe(1);
  expect(h.texts(OWNER_DM).filter((t) => t === 'keyed hello')).toHaveLength(1);
  // A resend of a message Slack does not have posts it.
  await h.connector.send({ chat: OWNER, text: 'never got there', key: 'outbound:9002', resend: true });
  expect(h.texts(OWNER_DM).filter((t) => t === 'never got there')).toHaveLength(1);
});

it('a retry after a lost answer does not post the message again', async () => {
  h.fake.failNext('chat.postMessage', { status: 500, afterDoing: true });
  const sent = await h.app.delivery.deliver({ dedupeKey: 'lost-answer', connector: 'slack', chat: OWNER, text: 'answer lost once' });
  expect(sent).toMatchObject({ status: 'sent' });
  expect(h.texts(OWNER_DM).filter((t) => t === 'answer lost once')).toHaveLength(1);
  const posted = h.fake.messages(OWNER_DM).find((m) => m.text === 'answer lost once');
  expect(sent).toMatchObject({ ids: [posted!.ts] });
});

it('a long message cut off after its first part is finished with the rest, each part once', async () => {
  const text = `${'first part. '.repeat(400)}\n\n${'second part. '.repeat(200)}`;
  // The first part is posted and its answer lost; the retry finds it and posts only the second.
  h.fake.failNext('chat.postMessage', { status: 500, afterDoing: true });
  const sent = await h.app.delivery.deliver({ dedupeKey: 'long-cut', connector: 'slack', chat: OWNER, text });
  expect(sent).toMatchObject({ status: 'sent' });
  const keyed = h.fake.messages(OWNER_DM).filter((m) => /first part|second part/.test(m.text ?? ''));
  expect(keyed.map((m) => m.metadata?.event_payload?.part)).toEqual([0, 1]);
  expect((sent as { ids: string[] }).ids).toEqual(keyed.map((m) => m.ts));
});

/**
 * A process died sending a message, after Slack took it: its row is left 'sending' by a session that is gone, and the
 * message is in the chat with its key. The maintenance sweep hands the row on; returns its id once it is sent.
 */
async function diedSending(message: { dedupeKey: string; chat: string; thread?: string; text: string }): Promise<number> {
  const [row] = (await h.app.database.db.execute(sql`insert into outbound_messages (dedupe_key, connector, chat, thread, text, status, claimed_at, claimed_by)
    values (${message.dedupeKey}, 'slack', ${message.chat}, ${message.thread ?? null}, ${message.text}, 'sending', now(), 'parlor:1:dead') returning id`)) as unknown as { id: number }[];
  await h.connector.send({ chat: message.chat, thread: message.thread, text: message.text, key: `outbound:${row.id}` });
  // Seen gone twice, a pass apart.
  await h.app.maintenance!.runOnce();
  await h.app.maintenance!.runOnce();
  await until(async () => {
    const [r] = (await h.app.database.db.execute(sql`select status from outbound_messages where id = ${row.id}`)) as unknown as { status: string }[];
    return r.status === 'sent';
  }, 'the taken-over row to be sent');
  return row.id;
}

it('a message a dead process was sending when it died, which Slack has, is not posted again when taken over', async () => {
  const id = await diedSending({ dedupeKey: 'died-sending', chat: OWNER, text: 'posted as it died' });
  const [done] = (await h.app.database.db.execute(sql`select resends, platform_message_ids from outbound_messages where id = ${id}`)) as unknown as {
    resends: number;
    platform_message_ids: string[];
  }[];
  expect(done.resends).toBe(1);
  const posted = h.fake.messages(OWNER_DM).filter((m) => m.text === 'posted as it died');
  expect(posted).toHaveLength(1);
  expect(done.platform_message_ids).toEqual([posted[0].ts]);
});

it('files that went out before a failure are not uploaded again by the retry, which goes on with the rest', async () => {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'slack-resend-files-'));
  try {
    const files = ['one.txt', 'two.txt'].map((name) => path.join(dir, name));
    for (const file of files) await fs.writeFile(file, `the ${path.basename(file)}`);
    // The first file is shared; the second fails past web-api's own retries (two), with nothing shared.
    h.fake.failNext('files.completeUploadExternal', { status: 503, after: 1, times: 3 });
    const sent = await h.app.delivery.deliver({ dedupeKey: 'files-cut', connector: 'slack', chat: OWNER, text: `Two files. ${'more words. '.repeat(400)}`, files });
    expect(sent).toMatchObject({ status: 'sent' });
    const shared = h.fake.messages(OWNER_DM).filter((m) => m.files?.length);
    expect(shared.map((m) => m.files!.map((f: { name: string }) => f.name))).toEqual([['one.txt'], ['two.txt']]);
    // The text's first part is the first file's comment; the rest follows, once.
    const ours = h.fake.messages(OWNER_DM).filter((m) => /Two files|more words/.test(m.text ?? ''));
    expect(ours.map((m) => (m.files?.length ? 'share' : 'text'))).toEqual(['share', 'text']);
    expect((sent as { ids: string[] }).ids.slice(0, 2)).toEqual(shared.map((m) => m.ts));
  } finally {
    await fs.rm(dir, { recursive: true, force: true });
  }
});

it('a long message cut off in a thread too long to look through is finished from where it stopped, each part once', async () => {
  // Slack lists a thread oldest first: past 200 replies, a lookup by key no longer sees what was just posted.
  const root = (await h.connector.send({ chat: TEAM, text: 'a busy thread' })).ids[0];
  for (let i = 0; i < 210; i++) await h.connector.send({ chat: TEAM, thread: root, text: `reply ${i}` });
  const text = `${'opening part. '.repeat(300)}\n\n${'closing part. '.repeat(100)}`;
  h.fake.failNext('chat.postMessage', { status: 503, after: 1 });
  const sent = await h.app.delivery.deliver({ dedupeKey: 'long-thread', connector: 'slack', chat: TEAM, thread: root, text });
  expect(sent).toMatchObject({ status: 'sent' });
  const keyed = h.fake.messages(TEAM).filter((m) => /opening part|closing part/.test(m.text ?? ''));
  expect(keyed.map((m) => m.metadata?.event_payload?.part)).toEqual([0, 1]);
});

it('a message a dead process was posting in a busy thread, which Slack has, is found there and not posted again', async () => {
  // Slack lists a thread oldest first, 200 at most a page: the part is past the first page.
  const root = (await h.connector.send({ chat: TEAM, text: 'another busy thread' })).ids[0];
  for (let i = 0; i < 230; i++) await h.connector.send({ chat: TEAM, thread: root, text: `busy ${i}` });
  await diedSending({ dedupeKey: 'died-in-thread', chat: TEAM, thread: root, text: 'posted in the thread as it died' });
  expect(h.fake.messages(TEAM).filter((m) => m.text === 'posted in the thread as it died')).toHaveLength(1);
  expect(h.fake.callsOf('conversations.replies').filter((c) => c.body.ts === root).length).toBeGreaterThanOrEqual(2);
}, 30_000);
