// What the database tells a connector that reads back what it missed (see InboundHistory): when its last event was
// stored, and its chats with a recent conversation, the most recent first.
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { Persona } from '../../src/config/persona.ts';
import { configuredFor, createInboundHistory } from '../../src/db/inbound-history.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';

let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(async () => {
  await t?.drop();
});

const ago = (minutes: number) => new Date(Date.now() - minutes * 60_000).toISOString();

it('names the last stored event of the connector, and its recent chats once each, the most recent first', async () => {
  const { db } = t.database;
  const discord = createInboundHistory(db, 'discord', () => ({ chats: [], people: [] }));
  expect(await discord.lastStoredAt()).toBeUndefined();
  expect(await discord.recentChats(new Date(0), 10)).toEqual([]);

  await db.execute(sql`insert into inbound_events (connector, external_id, received_at) values
    ('discord', 'a', ${ago(30)}), ('discord', 'b', ${ago(5)}), ('slack', 'c', ${ago(1)})`);
  const last = await discord.lastStoredAt();
  expect(Math.abs(last!.getTime() - (Date.now() - 5 * 60_000))).toBeLessThan(5000);

  await db.execute(sql`insert into conversations (id, persona, connector, chat, thread, last_activity_at) values
    ('p1:discord:dm1', 'p1', 'discord', 'dm1', null, ${ago(50)}),
    ('p2:discord:dm1', 'p2', 'discord', 'dm1', null, ${ago(2)}),
    ('p1:discord:ch:th', 'p1', 'discord', 'ch', 'th', ${ago(10)}),
    ('p1:discord:ch', 'p1', 'discord', 'ch', null, ${ago(20)}),
    ('p1:discord:old', 'p1', 'discord', 'old', null, ${ago(60 * 24 * 9)}),
    ('p1:slack:C1', 'p1', 'slack', 'C1', null, ${ago(1)}),
    ('p1:cron', 'p1', null, null, null, ${ago(1)})`);
  const week = new Date(Date.now() - 7 * 24 * 3600_000);
  // dm1 once (two personas), by its most recent conversation; not the one idle for nine days, nor another connector's.
  expect(await discord.recentChats(week, 10)).toEqual([{ chat: 'dm1' }, { chat: 'ch', thread: 'th' }, { chat: 'ch' }]);
  expect(await discord.recentChats(week, 2)).toEqual([{ chat: 'dm1' }, { chat: 'ch', thread: 'th' }]);
  expect(await discord.recentChats(new Date(Date.now() - 15 * 60_000), 10)).toEqual([{ chat: 'dm1' }, { chat: 'ch', thread: 'th' }]);
});

it('names where the personas hear people on the connector by configuration: their channels once each, and who may DM them', () => {
  const persona = (p: Partial<Persona>) => ({ channels: [], users: [], ...p }) as unknown as Persona;
  const personas = [
    persona({
      users: ['discord:1', 'telegram:2', 'discord:3'],
      channels: [
        { connector: 'discord', chat: 'c1', mention: true },
        { connector: 'discord', chat: 'c1', thread: 't1', mention: true },
        { connector: 'slack', chat: 'C9', mention: true },
      ],
    }),
    persona({ users: ['discord:3'], channels: [{ connector: 'discord', chat: 'c1', mention: false }] }),
  ];
  expect(configuredFor(personas, 'discord')).toEqual({ chats: [{ chat: 'c1' }, { chat: 'c1', thread: 't1' }], people: ['1', '3'] });
  expect(configuredFor(personas, 'telegram')).toEqual({ chats: [], people: ['2'] });
});
