// Discord end to end on the fake Discord (test/support/fake-discord.ts): a person's DM dispatched on the gateway →
// the bot's answer created over REST, the fake LLM answering at once. Beside it, a bare discord.js bot echoing on the
// same fake (the floor), run first, then Parlor. Prints figures; asserts nothing.
import fs from 'node:fs/promises';
import { Client, Events, GatewayIntentBits, Partials } from 'discord.js';
import pino from 'pino';
import { createDiscordConnector } from '../../connectors/discord/index.ts';
import { startApp } from '../../src/app.ts';
import { parseSettings } from '../../src/config/env.ts';
import { startFakeDiscord, type GatewayFrame } from '../support/fake-discord.ts';
import { startFakeLlm } from '../support/fake-llm.ts';
import { writePersonas } from '../support/harness.ts';
import { createBenchDatabase, percentile } from './support.ts';

const CHANNELS = Number(process.env.BENCH_CHATS ?? 30);
const PER_CHANNEL = Number(process.env.BENCH_PER_CHAT ?? 10);

async function main() {
  const users = Array.from({ length: CHANNELS }, (_, i) => ({ username: `person${i}` }));
  // Discord's own limits are not what is measured: the fake's buckets are wide.
  const fake = await startFakeDiscord({ users, rateLimit: { limit: 10_000, windowMs: 1000 } });
  const dms = users.map((u) => fake.dmChannel(u.username));

  // The bot's answers are created on the fake, which dispatches them on the gateway: whoever waits for the channel
  // is told at that moment.
  const waiting = new Map<string, () => void>();
  const push = fake.frames.push.bind(fake.frames);
  fake.frames.push = (...frames: GatewayFrame[]) => {
    for (const frame of frames) {
      if (frame.direction === 'out' && frame.t === 'MESSAGE_CREATE' && frame.d?.author?.id === fake.bot.id) {
        waiting.get(frame.d.channel_id)?.();
        waiting.delete(frame.d.channel_id);
      }
    }
    return push(...frames);
  };

  async function run(label: string, channels = CHANNELS, perChannel = PER_CHANNEL) {
    const samples: number[] = [];
    const started = performance.now();
    await Promise.all(
      Array.from({ length: channels }, async (_, i) => {
        for (let n = 0; n < perChannel; n++) {
          const answered = new Promise<void>((resolve) => waiting.set(dms[i], resolve));
          const t0 = performance.now();
          fake.sendDm({ from: users[i].username, content: `message ${n} from person ${i}` });
          await answered;
          samples.push(performance.now() - t0);
        }
      }),
    );
    const elapsed = performance.now() - started;
    const s = samples.sort((a, b) => a - b);
    console.log(
      `${label.padEnd(40)} n=${s.length}  p50 ${percentile(s, 50).toFixed(1).padStart(6)} ms  p99 ${percentile(s, 99).toFixed(1).padStart(6)} ms  ${(s.length / (elapsed / 1000)).toFixed(0)} msg/s`,
    );
    return { p50: percentile(s, 50), p99: percentile(s, 99) };
  }

  /** One DM in flight at a time, going round the channels: the latency without the queueing. */
  async function runSerial(label: string) {
    // The global request budget the run before spent refills first.
    await new Promise((r) => setTimeout(r, 1500));
    const samples: number[] = [];
    for (let n = 0; n < CHANNELS * 2; n++) {
      const i = n % CHANNELS;
      const answered = new Promise<void>((resolve) => waiting.set(dms[i], resolve));
      const t0 = performance.now();
      fake.sendDm({ from: users[i].username, content: `serial ${n}` });
      await answered;
      samples.push(performance.now() - t0);
    }
    const s = samples.sort((a, b) => a - b);
    console.log(`${label.padEnd(40)} n=${s.length}  p50 ${percentile(s, 50).toFixed(1).padStart(6)} ms  p99 ${percentile(s, 99).toFixed(1).padStart(6)} ms`);
    return { p50: percentile(s, 50), p99: percentile(s, 99) };
  }

  console.log(`Discord end to end on the fake Discord (DM dispatched → answer created), ${CHANNELS} DM channels × ${PER_CHANNEL}, each DM waiting for its answer`);

  // The floor: a bare discord.js bot that echoes.
  const echo = new Client({
    intents: [GatewayIntentBits.DirectMessages, GatewayIntentBits.MessageContent],
    partials: [Partials.Channel],
    rest: { api: fake.apiRoot },
  });
  echo.on(Events.MessageCreate, (message) => {
    if (message.author.id !== fake.bot.id) void message.channel.send(message.content);
  });
  const ready = new Promise((resolve) => echo.once(Events.ClientReady, resolve));
  await echo.login(fake.token);
  await ready;
  await run('warm-up (bare discord.js echo)', Math.min(5, CHANNELS), 4);
  const floor = await run(`bare discord.js echo, ${CHANNELS} channels × ${PER_CHANNEL}`);
  const floorOne = await runSerial('bare discord.js echo, one at a time');
  await echo.destroy();
  await fake.waitFor(() => fake.sessions().length === 0);

  const database = await createBenchDatabase();
  const llm = await startFakeLlm();
  const personasDir = await writePersonas({ bench: { connectors: { users: users.map((u) => `discord:${fake.user(u.username).id}`) } } });
  const log = pino({ level: process.env.LOG_LEVEL ?? 'warn' });
  const settings = parseSettings({ DATABASE_URL: database.parlorUrl, LLM_BASE_URL: llm.openaiBaseUrl, LLM_MODEL: 'fake-model', PARLOR_PERSONAS_DIR: personasDir });
  const app = await startApp({
    settings,
    log,
    workerConcurrency: 8,
    connectors: () => [createDiscordConnector({ token: fake.token, apiUrl: fake.apiRoot, messageContent: true, log })],
  });
  await run('warm-up (Parlor)', Math.min(5, CHANNELS), 4);
  const parlor = await run(`Parlor, ${CHANNELS} channels × ${PER_CHANNEL}`);
  const parlorOne = await runSerial('Parlor, one at a time');
  console.log(`Parlor / floor, ${CHANNELS} channels at once: p50 ${(parlor.p50 / floor.p50).toFixed(1)}×  p99 ${(parlor.p99 / floor.p99).toFixed(1)}×`);
  console.log(`Parlor / floor, one at a time: p50 ${(parlorOne.p50 / floorOne.p50).toFixed(1)}×  p99 ${(parlorOne.p99 / floorOne.p99).toFixed(1)}×`);
  // discord.js holds a bot to Discord's global 50 requests a second; Parlor spends two on an answer (typing, then
  // the message), the echo one: with 30 channels at once, that budget is what both queue for.
  console.log('(discord.js keeps a bot under Discord\'s global 50 requests/s: Parlor makes 2 per answer, typing and the message; the echo 1)');

  await app.stop();
  await llm.close();
  await database.drop();
  await fake.close();
  await fs.rm(personasDir, { recursive: true, force: true });
}

await main();
process.exit(0);
