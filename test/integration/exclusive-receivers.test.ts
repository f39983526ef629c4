// One receiver per bot token across processes on one database, where the platform gives a token's events to one
// receiver (Telegram long polling, a Discord gateway, Slack Socket Mode): a second process is refused with what to
// do, and may start once the first has stopped. Webhook and HTTP modes take no lock.
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { until } from '../support/until.ts';
import type { App } from '../../src/app.ts';
import { createDiscordConnector } from '../../connectors/discord/index.ts';
import { createSlackConnector } from '../../connectors/slack/index.ts';
import { createTelegramConnector } from '../../connectors/telegram/index.ts';
import pino from 'pino';
import { createRecordingConnector } from '../support/recording-connector.ts';
import { startHarness, type Harness } from '../support/harness.ts';

const receiver = (key: string) => Object.assign(createRecordingConnector('chat'), { exclusive: { key, describe: 'the test platform for this token' } });

describe('exclusive receivers', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness();
  });
  afterAll(() => h?.stop());

  it('refuses a second process for the same token, naming the one that has it, and lets it start once that one stops', async () => {
    const first = await h.startPeer({ connectors: () => [receiver('test:token-a')] });
    let second: App | undefined;
    try {
      await expect(h.startPeer({ connectors: () => [receiver('test:token-a')] })).rejects.toThrow(
        /^another Parlor process on this database already runs the test platform for this token \(parlor:\d+:[0-9a-f]+( from [0-9a-f.:]+)?\); the platform gives its events to one receiver per token: stop that process, or start this one with --role worker$/,
      );
      // Another token is another receiver.
      second = await h.startPeer({ connectors: () => [receiver('test:token-b')] });
      await first.stop();
      const third = await h.startPeer({ connectors: () => [receiver('test:token-a')] });
      await third.stop();
    } finally {
      await second?.stop();
    }
  });

  it('takes its lock again when its connection is lost (a Postgres restart), and stops receiving if another process took it meanwhile', async () => {
    const lockBackend = async () => {
      const rows = await h.query<{ pid: number; name: string }[]>(sql`
        select l.pid, a.application_name as name from pg_locks l join pg_stat_activity a on a.pid = l.pid
        where l.locktype = 'advisory' and l.classid = 721045 and l.granted
          and l.database = (select oid from pg_database where datname = current_database())`);
      return rows as unknown as { pid: number; name: string }[];
    };
    const chat = receiver('test:token-c');
    let stopped = false;
    const stop = chat.stop.bind(chat);
    chat.stop = async () => {
      stopped = true;
      await stop();
    };
    const first = await h.startPeer({ connectors: () => [chat], exclusiveCheckMs: 100 });
    try {
      const [held] = await lockBackend();
      expect(held.name).toBe(first.database.applicationName);
      // Its connection dies: within a check the lock is held again, on a new connection.
      await h.query(sql`select pg_terminate_backend(${held.pid})`);
      await until(async () => (await lockBackend()).some((l) => l.pid !== held.pid && l.name === first.database.applicationName), 'the lock to be taken again', 5000);
      expect(stopped).toBe(false);
      // It dies again, and this time another process takes the lock first: the first one stops its receiver.
      const [again] = await lockBackend();
      const other = await h.app.database.sql.reserve();
      await h.query(sql`select pg_terminate_backend(${again.pid})`);
      await until(async () => (await lockBackend()).length === 0, 'the lock to be gone with its connection', 5000);
      await other`select pg_try_advisory_lock(721045, hashtext('test:token-c'))`;
      await until(() => stopped, 'the first process to stop receiving', 5000);
      await other`select pg_advisory_unlock_all()`;
      other.release();
    } finally {
      await first.stop();
    }
  });

  it('is asked for where the platform allows one receiver, by a hash of the token, and not for webhooks', () => {
    const log = pino({ level: 'silent' });
    const polling = createTelegramConnector({ token: '123456:AAtelegram-secret-token', log });
    const webhook = createTelegramConnector({ token: '123456:AAtelegram-secret-token', webhookUrl: 'https://example.org', log });
    expect(polling.exclusive?.key).toMatch(/^telegram-polling:[0-9a-f]{24}$/);
    expect(polling.exclusive?.key).not.toContain('secret');
    expect(webhook.exclusive).toBeUndefined();
    expect(createDiscordConnector({ token: 'discord-token', log }).exclusive?.key).toMatch(/^discord-gateway:[0-9a-f]{24}$/);
    expect(createSlackConnector({ botToken: 'xoxb-1', appToken: 'xapp-1', log }).exclusive?.key).toMatch(/^slack-socket:[0-9a-f]{24}$/);
    expect(createSlackConnector({ botToken: 'xoxb-1', signingSecret: 'shh', log }).exclusive).toBeUndefined();
  });
});
