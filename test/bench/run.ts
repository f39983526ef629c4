// `npm run bench`: turn overhead through the real pipeline (ingress → Postgres → pg-boss → loop → model → delivery)
// with the fake LLM answering at once over loopback. Prints figures; asserts nothing.
import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import pino from 'pino';
import { sql } from 'drizzle-orm';
import { startApp } from '../../src/app.ts';
import { parseSettings } from '../../src/config/env.ts';
import type { Connector, OutboundMessage } from '../../src/connector.ts';
import { startFakeLlm } from '../support/fake-llm.ts';
import { writePersonas } from '../support/harness.ts';
import { createBenchDatabase, percentile } from './support.ts';

const CONVERSATIONS = 50;
const PER_CONVERSATION = 10;
const LONG_HISTORY = 10_000;
const LONG_SAMPLES = 200;

function summary(label: string, samples: number[], elapsedMs?: number) {
  const s = [...samples].sort((a, b) => a - b);
  const f = (n: number) => n.toFixed(1).padStart(7);
  const rate = elapsedMs ? `  ${(samples.length / (elapsedMs / 1000)).toFixed(0).padStart(5)} msg/s` : '';
  console.log(`${label.padEnd(44)} n=${String(s.length).padEnd(4)} p50 ${f(percentile(s, 50))} ms  p95 ${f(percentile(s, 95))} ms  p99 ${f(percentile(s, 99))} ms${rate}`);
}

/** A connector that timestamps each reply as it leaves, keyed by chat. */
function timingConnector() {
  let onInbound: Parameters<Connector['start']>[0] | undefined;
  const waiting = new Map<string, (at: number) => void>();
  let seq = 0;
  const connector: Connector = {
    id: 'bench',
    capabilities: { buttons: false, removeButtons: false, react: false, threads: false, typing: false, privateReplies: false, maxTextLength: 4096 },
    async start(handler) {
      onInbound = handler;
    },
    async stop() {},
    async send(message: OutboundMessage) {
      waiting.get(message.chat)?.(performance.now());
      waiting.delete(message.chat);
      return { ids: [String(++seq)] };
    },
  };
  /** Sends one message from `user` and resolves with the ms until its reply left the connector. */
  async function roundTrip(user: string): Promise<number> {
    const replied = new Promise<number>((resolve) => waiting.set(user, resolve));
    const t0 = performance.now();
    await onInbound!({
      connector: 'bench',
      externalId: randomBytes(8).toString('hex'),
      kind: 'message',
      chat: { id: user, type: 'dm' },
      sender: { id: user },
      text: `hello from ${user}`,
      messageId: String(seq),
    });
    return (await replied) - t0;
  }
  return { connector, roundTrip };
}

async function main() {
  const database = await createBenchDatabase();
  const fake = await startFakeLlm();
  const users = Array.from({ length: CONVERSATIONS + 1 }, (_, i) => `u${i}`);
  const personasDir = await writePersonas({
    bench: { soul: 'You are a benchmark persona.', connectors: { users: users.map((u) => `bench:${u}`) } },
  });
  const settings = parseSettings({
    DATABASE_URL: database.parlorUrl,
    LLM_BASE_URL: fake.openaiBaseUrl,
    LLM_MODEL: 'fake-model',
    PARLOR_PERSONAS_DIR: personasDir,
  });
  const timing = timingConnector();
  const app = await startApp({
    settings,
    log: pino({ level: 'warn' }),
    worker: true,
    workerConcurrency: 16,
    connectors: () => [timing.connector],
  });

  console.log(`Parlor turn overhead, fake LLM answering at once over loopback (${os.cpus().length} cores, Node ${process.version})`);
  // Warm-up: connections, prepared statements, JIT.
  for (let i = 0; i < 30; i++) await timing.roundTrip('u1');

  const serial: number[] = [];
  let t0 = performance.now();
  for (let i = 0; i < CONVERSATIONS * PER_CONVERSATION; i++) serial.push(await timing.roundTrip(users[(i % CONVERSATIONS) + 1]));
  summary('one message at a time, 50 conversations', serial, performance.now() - t0);
  fake.reset(); // the fake records every request; keep its memory out of the RSS figure

  const concurrent: number[] = [];
  t0 = performance.now();
  await Promise.all(
    users.slice(1).map(async (user) => {
      for (let i = 0; i < PER_CONVERSATION; i++) concurrent.push(await timing.roundTrip(user));
    }),
  );
  summary('50 conversations in parallel', concurrent, performance.now() - t0);
  fake.reset();

  // One conversation holding 10,000 earlier messages.
  const longId = 'bench:bench:u0';
  await timing.roundTrip('u0');
  await app.database.db.execute(sql`
    insert into messages (conversation_id, turn_id, role, content)
    select ${longId}, gen_random_uuid(), case when i % 2 = 0 then 'user' else 'assistant' end,
           jsonb_build_object('role', case when i % 2 = 0 then 'user' else 'assistant' end,
                              'content', 'earlier message number ' || i || ' with a little more text in it to look real')
    from generate_series(1, ${LONG_HISTORY}) as i`);
  const long: number[] = [];
  t0 = performance.now();
  for (let i = 0; i < LONG_SAMPLES; i++) long.push(await timing.roundTrip('u0'));
  summary(`one conversation with ${LONG_HISTORY} earlier messages`, long, performance.now() - t0);
  const longWindow = fake.requests.at(-1)?.body.messages.length;
  fake.reset();
  const short: number[] = [];
  t0 = performance.now();
  for (let i = 0; i < LONG_SAMPLES; i++) short.push(await timing.roundTrip('u2'));
  summary('same, a short conversation (for comparison)', short, performance.now() - t0);

  console.log(`messages sent to the model per turn: ${longWindow} in the long conversation, ${fake.requests.at(-1)?.body.messages.length} in the short one`);
  console.log(`peak RSS of this process (Parlor, its TypeScript loader and the fake LLM): ${(process.resourceUsage().maxRSS / 1024).toFixed(0)} MB; now ${(process.memoryUsage().rss / 1048576).toFixed(0)} MB`);

  await app.stop();
  await fake.close();
  await database.drop();
  await fs.rm(personasDir, { recursive: true, force: true });
}

await main();
process.exit(0);
