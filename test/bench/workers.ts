// Throughput with 1, 2 and 4 `parlor start --role worker` processes beside one ingress process on the same database
// (the fake LLM and the ingress in this process): CPU-bound, with a model that answers at once, and I/O-bound, with a
// model that takes 2 s per call. Prints figures; asserts nothing.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { startApp } from '../../src/app.ts';
import { parseSettings } from '../../src/config/env.ts';
import { startFakeLlm } from '../support/fake-llm.ts';
import { createRecordingConnector } from '../support/recording-connector.ts';
import { writePersonas } from '../support/harness.ts';
import { createBenchDatabase } from './support.ts';

const WORKERS = (process.env.BENCH_WORKERS ?? '1,2,4').split(',').map(Number);
const CPU_MESSAGES = Number(process.env.BENCH_WORKERS_CPU_MESSAGES ?? 300);
const CPU_CHATS = 100;
const IO_CHATS = Number(process.env.BENCH_WORKERS_IO_CHATS ?? 48);
const IO_DELAY_MS = 2000;
const MAIN = path.resolve(import.meta.dirname, '../../src/main.ts');

/** Starts a worker process and resolves once it says it is running. */
function startWorker(env: NodeJS.ProcessEnv): Promise<ChildProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', MAIN, 'start', '--role', 'worker'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  return new Promise((resolve, reject) => {
    let out = '';
    const onData = (chunk: Buffer) => {
      out += String(chunk);
      if (out.includes('Parlor is running')) resolve(child);
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.once('exit', (code) => reject(new Error(`the worker exited (${code}): ${out.slice(-2000)}`)));
  });
}

async function stopWorker(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  await exited;
}

async function main() {
  const database = await createBenchDatabase();
  const fake = await startFakeLlm();
  const users = Array.from({ length: CPU_CHATS }, (_, i) => `telegram:u${i}`);
  const personasDir = await writePersonas({ bench: { soul: 'You are a benchmark persona.', connectors: { users } } });
  const home = await fs.mkdtemp(path.join(os.tmpdir(), 'parlor-bench-workers-'));
  const env = {
    DATABASE_URL: database.parlorUrl,
    LLM_BASE_URL: fake.openaiBaseUrl,
    LLM_MODEL: 'fake-model',
    PARLOR_PERSONAS_DIR: personasDir,
    PARLOR_HOME: home,
    PARLOR_HTTP_PORT: '0',
  };
  const settings = parseSettings(env);
  // Named as a platform connector, so that the worker processes know the name the persona's files use.
  const chat = createRecordingConnector('telegram');
  // The ingress: the connector and the queue, no turns of its own.
  const ingress = await startApp({ settings, log: pino({ level: 'warn' }), worker: false, http: false, connectors: () => [chat] });
  // A worker knows the connectors of the deployment by their settings (it runs none): a token says Telegram is there.
  // Eight turns at once per worker (unless PARLOR_TURN_CONCURRENCY says otherwise), so that with the model taking 2 s
  // the chats outnumber the places of one worker and what more workers add shows.
  const childEnv = {
    PARLOR_TURN_CONCURRENCY: '8',
    ...process.env,
    ...env,
    LOG_LEVEL: 'info',
    TELEGRAM_BOT_TOKEN: '123456:AAbench-worker-never-connects',
  };

  const results: string[] = [];
  let round = 0;
  for (const count of WORKERS) {
    const workers = await Promise.all(Array.from({ length: count }, () => startWorker(childEnv)));
    try {
      for (const [label, messages, chats, delayMs] of [
        ['CPU-bound (model answers at once)', CPU_MESSAGES, CPU_CHATS, 0],
        [`I/O-bound (model takes ${IO_DELAY_MS / 1000} s)`, IO_CHATS, IO_CHATS, IO_DELAY_MS],
      ] as const) {
        round++;
        fake.reset();
        fake.setDefault((req) => ({ text: `ok ${req.lastUserText}`, delayMs }));
        chat.sent.length = 0;
        const started = performance.now();
        for (let i = 0; i < messages; i++) {
          const u = i % chats;
          await chat.inject({ text: `r${round} m${i}`, chat: { id: `u${u}`, type: 'dm' }, sender: { id: `u${u}` } });
        }
        await chat.waitForSent(messages, 300_000);
        const seconds = (performance.now() - started) / 1000;
        results.push(`  ${count} worker${count > 1 ? 's' : ' '}  ${label.padEnd(36)} ${String(messages).padStart(4)} DMs over ${String(chats).padStart(3)} chats: ${seconds.toFixed(1).padStart(5)} s, ${(messages / seconds).toFixed(1).padStart(6)} DMs/s`);
      }
    } finally {
      await Promise.all(workers.map(stopWorker));
    }
  }
  console.log(`Throughput by worker processes (${os.cpus().length} cores; one ingress process, the fake LLM in the same process as the ingress)`);
  for (const line of results) console.log(line);
  await ingress.stop();
  await fake.close();
  await database.drop();
  await fs.rm(personasDir, { recursive: true, force: true });
  await fs.rm(home, { recursive: true, force: true });
}

await main();
process.exit(0);
