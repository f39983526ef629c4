// Events kept on disk (acknowledged to their platform before they could be stored) are stored by the running process
// once they are old enough that their keeper's own tries are over: not only at the next start.
import fs from 'node:fs/promises';
import path from 'node:path';
import pino from 'pino';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createHeldEvents } from '../../src/ingress/held-events.ts';
import { startHarness, type Harness } from '../support/harness.ts';
import { createRecordingConnector } from '../support/recording-connector.ts';
import { until } from '../support/until.ts';

let h: Harness;
const OLDER_THAN_MS = 400;

beforeAll(async () => {
  h = await startHarness({ app: { heldEventsReplay: { everyMs: 100, olderThanMs: OLDER_THAN_MS } } });
});
afterAll(async () => {
  await h?.stop();
});

it('an event kept on disk while the process runs is stored and answered once it is old enough, once', async () => {
  const directory = path.join(h.home, 'held-events');
  const held = createHeldEvents({ directory, log: pino({ level: 'silent' }) });
  const keptAt = Date.now();
  await held.keep({
    connector: 'chat',
    externalId: 'kept-while-running',
    kind: 'message',
    chat: { id: 'u1', type: 'dm' },
    sender: { id: 'u1', name: 'Ana' },
    text: 'kept while running',
  });
  const [reply] = await h.chat.waitForSent(1, 10_000);
  expect(reply.text).toBe('echo: kept while running');
  // Left to its keeper while it was younger than that.
  expect(Date.now() - keptAt).toBeGreaterThanOrEqual(OLDER_THAN_MS);
  await until(async () => (await fs.readdir(directory)).length === 0, 'the kept event dropped');
  await h.app.waitForIdle('testy:chat:u1');
  const [events] = await h.query<{ n: number }>(sql`select count(*)::int as n from inbound_events where external_id like '%kept-while-running%'`);
  expect(events.n).toBe(1);
  await new Promise((r) => setTimeout(r, 300));
  expect(h.chat.sent).toHaveLength(1);
});

it('at a start, an event kept on disk by the process before is stored before what the connectors bring meanwhile: its chat stays in order', async () => {
  // The process before kept some of u2's events, and died before it could store them.
  const held = createHeldEvents({ directory: path.join(h.home, 'held-events'), log: pino({ level: 'silent' }) });
  for (const n of [1, 2, 3]) {
    await held.keep({ connector: 'chat', externalId: `kept-before-${n}`, kind: 'message', chat: { id: 'u2', type: 'dm' }, sender: { id: 'u2', name: 'Ana' }, text: `kept ${n}` });
    await new Promise((r) => setTimeout(r, 10));
  }
  // The process that starts now: its connector brings u2's next event as soon as it starts.
  const chat = createRecordingConnector('chat');
  const start = chat.start.bind(chat);
  let brought: Promise<unknown> | undefined;
  chat.start = async (onInbound, keeper) => {
    await start(onInbound, keeper);
    brought = chat.inject({ externalId: 'came-at-start', chat: { id: 'u2', type: 'dm' }, sender: { id: 'u2', name: 'Ana' }, text: 'second, new' });
  };
  await h.startPeer({ connectors: () => [chat], remoteConnectors: [] });
  await brought;
  await until(async () => (await fs.readdir(path.join(h.home, 'held-events'))).length === 0, 'the kept event stored');
  const stored = await h.query<{ text: string }>(sql`select content->>'content' as text from messages where conversation_id = 'testy:chat:u2' and role = 'user' order by id`);
  expect(stored.map((m) => m.text)).toEqual(['kept 1', 'kept 2', 'kept 3', 'second, new'].map((text) => expect.stringContaining(text)));
});
