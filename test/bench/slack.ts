// Slack end to end on the fake Slack in Socket Mode: an envelope sent over the socket → the reply's
// chat.postMessage received by the fake, fake LLM answering at once; before it, a bare Bolt app echoing on the same
// fake (the floor). One at a time on the fake's socket: Slack sends an envelope to one connection of the app.
import fs from 'node:fs/promises';
import { App, LogLevel } from '@slack/bolt';
import pino from 'pino';
import { createSlackConnector } from '../../connectors/slack/index.ts';
import { startApp } from '../../src/app.ts';
import { parseSettings } from '../../src/config/env.ts';
import { startFakeLlm } from '../support/fake-llm.ts';
import { startFakeSlack, type SlackApiCall } from '../support/fake-slack.ts';
import { writePersonas } from '../support/harness.ts';
import { createBenchDatabase, percentile } from './support.ts';

const CHANNELS = Number(process.env.BENCH_CHANNELS ?? 30);
const PER_CHANNEL = Number(process.env.BENCH_PER_CHANNEL ?? 10);

const userOf = (i: number) => `U0B${String(i).padStart(3, '0')}`;
const dmOf = (i: number) => `D0B${String(i).padStart(3, '0')}`;

async function main() {
  const database = await createBenchDatabase();
  // Replies arrive as chat.postMessage calls on the fake; resolve whoever waits for that channel.
  const waiting = new Map<string, () => void>();
  const fake = await startFakeSlack({
    onCall: (call: SlackApiCall) => {
      if (call.method !== 'chat.postMessage' || call.status !== 200) return;
      const channel = (call.response as { channel?: string }).channel ?? '';
      waiting.get(channel)?.();
      waiting.delete(channel);
    },
  });

  /** One message in flight, going round the channels. */
  async function runSerial(label: string) {
    const samples: number[] = [];
    const started = performance.now();
    for (let n = 0; n < CHANNELS * 2; n++) {
      const i = n % CHANNELS;
      const replied = new Promise<void>((resolve) => waiting.set(dmOf(i), resolve));
      const t0 = performance.now();
      await fake.dm({ user: userOf(i), text: `serial ${n}` });
      await replied;
      samples.push(performance.now() - t0);
    }
    const elapsed = performance.now() - started;
    const s = samples.sort((a, b) => a - b);
    console.log(
      `${label.padEnd(36)} n=${s.length}  p50 ${percentile(s, 50).toFixed(1).padStart(6)} ms  p99 ${percentile(s, 99).toFixed(1).padStart(6)} ms  ${(s.length / (elapsed / 1000)).toFixed(0)} msg/s`,
    );
    return { p50: percentile(s, 50), p99: percentile(s, 99) };
  }

  async function run(label: string, channels = CHANNELS, perChannel = PER_CHANNEL) {
    const samples: number[] = [];
    const started = performance.now();
    await Promise.all(
      Array.from({ length: channels }, async (_, i) => {
        for (let n = 0; n < perChannel; n++) {
          const replied = new Promise<void>((resolve) => waiting.set(dmOf(i), resolve));
          const t0 = performance.now();
          await fake.dm({ user: userOf(i), text: `message ${n} from ${userOf(i)}` });
          await replied;
          samples.push(performance.now() - t0);
        }
      }),
    );
    const elapsed = performance.now() - started;
    const s = samples.sort((a, b) => a - b);
    console.log(
      `${label.padEnd(36)} n=${s.length}  p50 ${percentile(s, 50).toFixed(1).padStart(6)} ms  p99 ${percentile(s, 99).toFixed(1).padStart(6)} ms  ${(s.length / (elapsed / 1000)).toFixed(0)} msg/s`,
    );
    return { p50: percentile(s, 50), p99: percentile(s, 99) };
  }

  console.log(`Slack end to end on the fake Slack in Socket Mode (envelope sent → chat.postMessage received), ${CHANNELS} DM channels × ${PER_CHANNEL}, each waiting for its reply`);

  // The floor: a bare Bolt app that echoes (Bolt acknowledges before its listener runs).
  const echo = new App({
    token: fake.botToken,
    appToken: fake.appToken,
    socketMode: true,
    logLevel: LogLevel.ERROR,
    clientOptions: { slackApiUrl: fake.apiUrl, retryConfig: { retries: 2, factor: 2, minTimeout: 500, maxTimeout: 3000 } },
  });
  echo.message(async ({ message, say }) => {
    const m = message as { text?: string; subtype?: string };
    if (!m.subtype && m.text) await say(m.text);
  });
  await echo.start();
  await run('warm-up (bare Bolt echo)', 5, 4);
  const floor = await run(`bare Bolt echo, ${CHANNELS} channels × ${PER_CHANNEL}`);
  const floorOne = await runSerial('bare Bolt echo, one at a time');
  await echo.stop();
  await fake.waitFor(() => fake.openConnections() === 0, 5000);

  const llm = await startFakeLlm();
  const personasDir = await writePersonas({ bench: { connectors: { users: Array.from({ length: CHANNELS }, (_, i) => `slack:${userOf(i)}`) } } });
  const log = pino({ level: process.env.LOG_LEVEL ?? 'warn' });
  const app = await startApp({
    settings: parseSettings({ DATABASE_URL: database.parlorUrl, LLM_BASE_URL: llm.openaiBaseUrl, LLM_MODEL: 'fake-model', PARLOR_PERSONAS_DIR: personasDir }),
    log,
    workerConcurrency: 8,
    connectors: () => [createSlackConnector({ botToken: fake.botToken, appToken: fake.appToken, apiUrl: fake.apiUrl, log })],
  });
  await run('warm-up (Parlor)', 5, 4);
  const parlor = await run(`Parlor, ${CHANNELS} channels × ${PER_CHANNEL}`);
  console.log(`Parlor / floor, ${CHANNELS} channels at once: p50 ${(parlor.p50 / floor.p50).toFixed(1)}×, p99 ${(parlor.p99 / floor.p99).toFixed(1)}×`);
  const parlorOne = await runSerial('Parlor, one at a time');
  console.log(`Parlor / floor, one at a time: p50 ${(parlorOne.p50 / floorOne.p50).toFixed(1)}×, p99 ${(parlorOne.p99 / floorOne.p99).toFixed(1)}×`);

  await app.stop();
  await llm.close();
  await fake.close();
  await database.drop();
  await fs.rm(personasDir, { recursive: true, force: true });
}

await main();
process.exit(0);
