// How much of each model request is the previous request of the same conversation, byte for byte: what a provider's
// prompt cache can reuse. A 300-message conversation is driven turn by turn through the real pipeline, on the default
// history budget and the built-in tools, against the fake LLM. Prints figures; asserts nothing.
import fs from 'node:fs/promises';
import pino from 'pino';
import { sql } from 'drizzle-orm';
import { startApp } from '../../src/app.ts';
import { parseSettings } from '../../src/config/env.ts';
import { DEFAULT_HISTORY_BUDGET } from '../../src/agent/history.ts';
import { SUMMARY_NOTE } from '../../src/agent/history-window.ts';
import { startFakeLlm } from '../support/fake-llm.ts';
import { createRecordingConnector } from '../support/recording-connector.ts';
import { writePersonas } from '../support/harness.ts';
import { createBenchDatabase, percentile } from './support.ts';

const MESSAGES = Number(process.env.BENCH_PREFIX_MESSAGES ?? 300);
const CONVERSATION = 'bench:chat:u1';

/** The same conversation on every run: a small seeded generator. */
function random(seed: number) {
  return () => ((seed = (Math.imul(seed ^ (seed >>> 15), 2654435761) + 0x6d2b79f5) >>> 0) / 2 ** 32);
}

const WORDS = 'the a plan trip weather garden recipe meeting tomorrow budget train book idea question answer list note friend city'.split(' ');

function text(rand: () => number, min: number, max: number): string {
  const length = min + Math.floor(rand() * (max - min));
  let out = '';
  while (out.length < length) out += `${WORDS[Math.floor(rand() * WORDS.length)]} `;
  return out.trim();
}

function commonPrefix(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a.charCodeAt(i) === b.charCodeAt(i)) i++;
  return i;
}

async function main() {
  const database = await createBenchDatabase();
  const fake = await startFakeLlm();
  const personasDir = await writePersonas({ bench: { soul: 'You are a benchmark persona who helps with everyday plans.', connectors: { users: ['chat:u1'] } } });
  const settings = parseSettings({ DATABASE_URL: database.parlorUrl, LLM_BASE_URL: fake.openaiBaseUrl, LLM_MODEL: 'fake-model', PARLOR_PERSONAS_DIR: personasDir });
  const chat = createRecordingConnector('chat');
  const app = await startApp({ settings, log: pino({ level: 'warn' }), worker: true, connectors: () => [chat] });

  const rand = random(16);
  let turn = 0;
  fake.setSummaries(() => ({ text: `The person and the persona talked about ${text(rand, 600, 1500)}.` }));
  fake.setDefault((req) => {
    // About one turn in six looks at the clock before answering.
    const last = req.body.messages.at(-1);
    if (last.role === 'user' && turn % 6 === 5) return { toolCalls: [{ name: 'clock', arguments: { timezone: 'UTC' } }] };
    return { text: text(rand, 200, 1500) };
  });

  const count = async () => ((await app.database.db.execute(sql`select count(*)::int as n from messages where conversation_id = ${CONVERSATION}`)) as unknown as { n: number }[])[0].n;
  const started = performance.now();
  while ((await count()) < MESSAGES) {
    const before = chat.sent.length;
    await chat.inject({ text: text(rand, 40, 600) });
    await chat.waitForSent(before + 1, 60_000);
    await app.waitForIdle(CONVERSATION);
    turn++;
  }
  const elapsed = performance.now() - started;

  const requests = fake.requests;
  const summaries = fake.summaries.length;
  const shares: number[] = [];
  for (let i = 1; i < requests.length; i++) {
    const previous = JSON.stringify(requests[i - 1].body);
    const current = JSON.stringify(requests[i].body);
    shares.push(commonPrefix(previous, current) / current.length);
  }
  const sorted = [...shares].sort((a, b) => a - b);
  const average = shares.reduce((a, b) => a + b, 0) / shares.length;
  const pct = (x: number) => `${(x * 100).toFixed(1)} %`;
  const withSummary = requests.filter((r) => String(r.body.messages[1]?.content ?? '').startsWith(SUMMARY_NOTE)).length;
  const sizes = requests.map((r) => JSON.stringify(r.body).length).sort((a, b) => a - b);
  console.log(
    `Prompt prefix, one conversation of ${await count()} messages in ${turn} turns (${requests.length} model requests, history budget ${DEFAULT_HISTORY_BUDGET.maxMessages} messages / ${DEFAULT_HISTORY_BUDGET.maxChars} characters, OpenAI wire format)`,
  );
  console.log(`share of each request that is a byte-identical prefix of the previous one: average ${pct(average)}  p10 ${pct(percentile(sorted, 10))}  min ${pct(sorted[0])}`);
  console.log(`summary jobs run: ${summaries}; requests carrying a summary: ${withSummary}; request size p50 ${percentile(sizes, 50)} bytes, max ${sizes.at(-1)} bytes; ${(elapsed / turn).toFixed(0)} ms per turn`);

  await app.stop();
  await fake.close();
  await database.drop();
  await fs.rm(personasDir, { recursive: true, force: true });
}

await main();
process.exit(0);
