// Telegram end to end: an update posted by the Bot API emulator → the persona's reply received by the emulator,
// fake LLM answering at once; beside it, a bare grammY bot echoing on the same emulator (the floor).
// Both receive by webhook (the emulator's getUpdates returns at once, which would measure a polling sleep).
import fs from 'node:fs/promises';
import { createServer, request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Bot, webhookCallback } from 'grammy';
import pino from 'pino';
import { TelegramServer } from 'telegram-test-api/lib/telegramServer.js';
import { createTelegramConnector, webhookSecret } from '../../connectors/telegram/index.ts';
import { startApp } from '../../src/app.ts';
import { parseSettings } from '../../src/config/env.ts';
import { startFakeLlm } from '../support/fake-llm.ts';
import { writePersonas } from '../support/harness.ts';
import { createBenchDatabase, percentile } from './support.ts';

const CHATS = Number(process.env.BENCH_CHATS ?? 30);
const PER_CHAT = Number(process.env.BENCH_PER_CHAT ?? 10);
const PARLOR_TOKEN = '111:parlor';
const ECHO_TOKEN = '222:echo';

const listen = (server: ReturnType<typeof createServer>) =>
  new Promise<number>((resolve) => server.listen(0, '127.0.0.1', () => resolve((server.address() as AddressInfo).port)));

async function main() {
  const database = await createBenchDatabase();

  const emulator = new TelegramServer({ port: 0, host: '127.0.0.1', storeTimeout: 600 });
  await emulator.start();
  const apiRoot = emulator.config.apiURL;

  // Replies arrive as bot messages on the emulator; resolve whoever waits for that chat.
  const waiting = new Map<string, () => void>();
  emulator.on('AddedBotMessage', () => {
    const last = emulator.storage.botMessages[emulator.storage.botMessages.length - 1];
    const key = `${last.botToken}:${last.message.chat_id}`;
    waiting.get(key)?.();
    waiting.delete(key);
  });

  // Parlor on a webhook. The emulator sends no secret header, and hands concurrent updates the same update_id
  // (it increments after the webhook answers), so a small forwarder adds the header and numbers updates uniquely,
  // as Telegram does.
  const fake = await startFakeLlm();
  let nextUpdateId = 1;
  const users = Array.from({ length: CHATS }, (_, i) => `telegram:${5000 + i}`);
  const personasDir = await writePersonas({ bench: { connectors: { users } } });
  const log = pino({ level: process.env.LOG_LEVEL ?? 'warn' });
  const parlorHttp = { port: 0 };
  const forwarder = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = Buffer.from(JSON.stringify({ ...JSON.parse(Buffer.concat(chunks).toString()), update_id: nextUpdateId++ }));
    const out = request(
      {
        host: '127.0.0.1',
        port: parlorHttp.port,
        path: req.url,
        method: 'POST',
        headers: { 'content-type': 'application/json', 'content-length': body.length, 'x-telegram-bot-api-secret-token': webhookSecret(PARLOR_TOKEN) },
      },
      (answer) => {
        res.writeHead(answer.statusCode ?? 500);
        answer.pipe(res);
      },
    );
    out.end(body);
  });
  const forwarderPort = await listen(forwarder);
  const settings = parseSettings({
    DATABASE_URL: database.url,
    LLM_BASE_URL: fake.openaiBaseUrl,
    LLM_MODEL: 'fake-model',
    PARLOR_PERSONAS_DIR: personasDir,
    PARLOR_HTTP_PORT: '0',
  });
  const app = await startApp({
    settings,
    log,
    http: true,
    workerConcurrency: 8,
    connectors: () => [createTelegramConnector({ token: PARLOR_TOKEN, apiRoot, webhookUrl: `http://127.0.0.1:${forwarderPort}`, log })],
  });
  parlorHttp.port = app.http!.port;

  // The floor: a bare grammY bot that echoes, on a webhook of its own.
  const echo = new Bot(ECHO_TOKEN, { client: { apiRoot }, botInfo: { id: 1, is_bot: true, first_name: 'Echo', username: 'echo_bot' } as never });
  echo.on('message:text', (ctx) => ctx.reply(ctx.message.text));
  const echoServer = createServer(webhookCallback(echo, 'http'));
  const echoPort = await listen(echoServer);
  emulator.setWebhook({ url: `http://127.0.0.1:${echoPort}` } as never, ECHO_TOKEN);

  async function run(token: string, label: string, chats = CHATS, perChat = PER_CHAT) {
    const samples: number[] = [];
    const started = performance.now();
    await Promise.all(
      Array.from({ length: chats }, async (_, i) => {
        const userId = 5000 + i;
        const client = emulator.getClient(token, { userId, chatId: userId, type: 'private', firstName: 'U', userName: `u${i}` });
        for (let n = 0; n < perChat; n++) {
          const replied = new Promise<void>((resolve) => waiting.set(`${token}:${userId}`, resolve));
          const t0 = performance.now();
          await client.sendMessage(client.makeMessage(`message ${n} from ${userId}`));
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
    return percentile(s, 50);
  }

  async function runSerial(token: string, label: string) {
    const samples: number[] = [];
    const started = performance.now();
    for (let n = 0; n < CHATS * 2; n++) {
      const userId = 5000 + (n % CHATS);
      const client = emulator.getClient(token, { userId, chatId: userId, type: 'private', firstName: 'U', userName: `u${n}` });
      const replied = new Promise<void>((resolve) => waiting.set(`${token}:${userId}`, resolve));
      const t0 = performance.now();
      await client.sendMessage(client.makeMessage(`serial ${n}`));
      await replied;
      samples.push(performance.now() - t0);
    }
    const s = samples.sort((a, b) => a - b);
    const elapsed = performance.now() - started;
    console.log(
      `${label.padEnd(36)} n=${s.length}  p50 ${percentile(s, 50).toFixed(1).padStart(6)} ms  p99 ${percentile(s, 99).toFixed(1).padStart(6)} ms  ${(s.length / (elapsed / 1000)).toFixed(0)} msg/s`,
    );
    return percentile(s, 50);
  }

  console.log('Telegram end to end on the Bot API emulator (update posted → reply received), each DM waiting for its reply');
  await run(ECHO_TOKEN, 'warm-up (bare grammY echo)');
  await run(PARLOR_TOKEN, 'warm-up (Parlor)', Math.min(5, CHATS), 4);
  const floor = await run(ECHO_TOKEN, `bare grammY echo, ${CHATS} chats × ${PER_CHAT}`);
  const parlor = await run(PARLOR_TOKEN, `Parlor, ${CHATS} chats × ${PER_CHAT}`);
  console.log(`Parlor / floor at p50, ${CHATS} chats at once: ${(parlor / floor).toFixed(1)}×`);
  // One message in flight, going round the chats (a single chat sending without pause would measure the per-chat
  // pacing that keeps a bot inside Telegram's flood limits).
  const floorOne = await runSerial(ECHO_TOKEN, 'bare grammY echo, one at a time');
  const parlorOne = await runSerial(PARLOR_TOKEN, 'Parlor, one at a time');
  console.log(`Parlor / floor at p50, one at a time: ${(parlorOne / floorOne).toFixed(1)}×`);

  await app.stop();
  await new Promise((r) => echoServer.close(r));
  await new Promise((r) => forwarder.close(r));
  await emulator.stop();
  await fake.close();
  await database.drop();
  await fs.rm(personasDir, { recursive: true, force: true });
}

await main();
process.exit(0);
