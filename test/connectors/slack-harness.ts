// The Slack connector in the real app against the fake Slack, for the Slack-specific tests: the conformance
// persona (owner U0OWNER approves, helper U0HELPER may talk, C0TEAM answered when mentioned).
import { sql } from 'drizzle-orm';
import pino from 'pino';
import { createSlackConnector, EVENTS_PATH, type SlackOptions } from '../../connectors/slack/index.ts';
import type { Connector } from '../../src/connector.ts';
import { startConformanceApp, type ConformanceApp } from '../conformance/app.ts';
import { startFakeSlack, type FakeSlack, type FakeSlackOptions } from '../support/fake-slack.ts';

export const OWNER = 'U0OWNER';
export const HELPER = 'U0HELPER';
export const TEAM = 'C0TEAM';
export const OWNER_DM = 'D0OWNER';
export const SIGNING_SECRET = 'slack-test-signing-secret';

export interface SlackHarness extends ConformanceApp {
  fake: FakeSlack;
  connector: Connector;
  /** HTTP mode: the endpoint Slack posts to. */
  eventsUrl?: string;
  /** Rows in a table (inbound_events, messages…). */
  count(table: 'inbound_events' | 'messages' | 'conversations'): Promise<number>;
  /** What the bot has posted in a channel, texts in order. */
  texts(channel: string): string[];
}

export async function startSlackHarness(options: { mode: 'socket' | 'http'; connector?: Partial<SlackOptions>; fake?: FakeSlackOptions; deliverOverHttp?: boolean }): Promise<SlackHarness> {
  const fake = await startFakeSlack({ users: { [OWNER]: { name: 'ana', real_name: 'Ana' }, [HELPER]: { name: 'bo', real_name: 'Bo' }, U0CAROL: { name: 'carol', real_name: 'Carol' } }, ...options.fake });
  let connector: Connector | undefined;
  let running: ConformanceApp;
  try {
    running = await startConformanceApp({
      places: { connector: 'slack', users: [`slack:${OWNER}`, `slack:${HELPER}`], approvers: [`slack:${OWNER}`], primaryChat: OWNER, team: TEAM },
      http: options.mode === 'http',
      connectors: () => [
        (connector = createSlackConnector({
          botToken: fake.botToken,
          ...(options.mode === 'socket' ? { appToken: fake.appToken } : { signingSecret: SIGNING_SECRET }),
          apiUrl: fake.apiUrl,
          log: pino({ level: process.env.TEST_LOG_LEVEL ?? 'silent' }),
          ...options.connector,
        })),
      ],
    });
  } catch (err) {
    await fake.close();
    throw err;
  }
  const eventsUrl = options.mode === 'http' ? `http://127.0.0.1:${running.app.http!.port}${EVENTS_PATH}` : undefined;
  if (eventsUrl && options.deliverOverHttp !== false) fake.deliverOverHttp({ url: eventsUrl, signingSecret: SIGNING_SECRET });
  return {
    ...running,
    fake,
    connector: connector!,
    eventsUrl,
    async count(table) {
      const rows = (await running.app.database.db.execute(sql.raw(`select count(*)::int as n from ${table}`))) as unknown as { n: number }[];
      return rows[0].n;
    },
    texts: (channel) => fake.messages(channel).map((m) => m.text ?? ''),
    async stop() {
      await running.stop();
      await fake.close();
    },
  };
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
