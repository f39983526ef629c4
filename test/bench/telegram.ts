// Telegram end to end: an update posted by the Bot API emulator → the persona's reply received by the emulator,
// fake LLM answering at once; beside it, a bare grammY bot echoing on the same emulator (the floor). Parlor runs as
// a real `parlor start` process and the floor as a process of its own, both receiving by webhook through the same
// forwarder (the emulator's getUpdates returns at once, which would measure a polling sleep). Prints, for a burst (BENCH_CHATS chats sending
// BENCH_PER_CHAT DMs each, every chat waiting for its reply) and for isolated DMs (one in flight), the latency
// beside the floor's, and where Parlor's time goes per DM: its CPU, Postgres's CPU, the statements and writing
// transactions Postgres saw, and a CPU profile by package. Prints figures; asserts nothing. Everything runs on the
// `node` first on PATH (the figures differ between Node versions: put another first to measure it).
//
// Knobs: BENCH_CHATS (100), BENCH_PER_CHAT (3), BENCH_ISOLATED (300 DMs: fewer leave a run's figures to whether a
// full collection fell in it), BENCH_WARMUP (4 rounds of warm-up: a burst
// of 2 DMs per chat and 20 isolated DMs, for each), LOG_LEVEL (warn, Parlor's),
// BENCH_REPEAT (0: that many more rounds of the measured runs, each printed, and their median),
// BENCH_PROFILE (1: take the profiled burst; isolated: profile isolated DMs instead), BENCH_PROFILE_TOP (N: its N costliest functions), BENCH_PROFILE_FILE
// (a path: the raw profile, which DevTools opens), BENCH_PERF (a path: one more burst under a system-wide `perf record`, split by process, kernel apart), BENCH_DB_DELAY_MS (Parlor's database that far away, each way); PARLOR_TURN_CONCURRENCY is passed on to Parlor.
import { fork, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs/promises';
import { createServer, request } from 'node:http';
import net, { type AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { execa } from 'execa';
import postgres from 'postgres';
import { TelegramServer } from 'telegram-test-api/lib/telegramServer.js';
import { webhookSecret } from '../../connectors/telegram/index.ts';
import { startFakeLlm } from '../support/fake-llm.ts';
import { writePersonas } from '../support/harness.ts';
import { createBenchDatabase, percentile } from './support.ts';
import {
  connectProfiler,
  resetPeakRss,
  nextTransactionId,
  walFlushes,
  postgresCpuBetween,
  postgresCpuSample,
  machineCpuTicks,
  processCpuMs,
  threadsCpuMs,
  threadsCpuPerDm,
  processRssMb,
  readStatements,
  resetStatements,
  trackStatements,
  statementLabel,
  summariseProfile,
} from './turn-costs.ts';

const CHATS = Number(process.env.BENCH_CHATS ?? 100);
const PER_CHAT = Number(process.env.BENCH_PER_CHAT ?? 3);
const ISOLATED = Number(process.env.BENCH_ISOLATED ?? 300);
const PROFILE = process.env.BENCH_PROFILE !== '0';
/** BENCH_PROFILE=isolated: the profiled run is of isolated DMs instead of a burst. */
const PROFILE_ISOLATED = process.env.BENCH_PROFILE === 'isolated';
const WARM_UP_ROUNDS = Number(process.env.BENCH_WARMUP ?? 4);
const REPEAT = Number(process.env.BENCH_REPEAT ?? 0);
/** Long enough for a chat's send allowance to fill again (see connectors/telegram/throttle.ts: 3 messages, 1 a second). */
const CHAT_REST_MS = 3500;
for (const [knob, value] of [['BENCH_CHATS', CHATS], ['BENCH_PER_CHAT', PER_CHAT], ['BENCH_ISOLATED', ISOLATED], ['BENCH_WARMUP', WARM_UP_ROUNDS]] as const) {
  if (!Number.isInteger(value) || value < 1) {
    console.error(`${knob}=${process.env[knob]} is not a whole number of at least 1 (every figure is per DM)`);
    process.exit(2);
  }
}
if (!Number.isInteger(REPEAT) || REPEAT < 0) {
  console.error(`BENCH_REPEAT=${process.env.BENCH_REPEAT} is not a whole number (0 or more rounds after the first)`);
  process.exit(2);
}
/** Where the forwarder takes the floor's updates (Parlor's keep their own path). */
const ECHO_PATH = '/floor';
const PARLOR_TOKEN = '111:parlor';
const ECHO_TOKEN = '222:echo';
const ROOT = path.resolve(import.meta.dirname, '../..');

const listen = (server: ReturnType<typeof createServer>) =>
  new Promise<number>((resolve) => server.listen(0, '127.0.0.1', () => resolve((server.address() as AddressInfo).port)));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  await new Promise((r) => server.close(r));
  return port;
}

/** `parlor start` with an inspector (for the profiled run), resolved once its health check answers. */
async function startParlor(env: NodeJS.ProcessEnv, port: number): Promise<{ child: ChildProcess; inspector: string; output: () => string }> {
  const child = spawn(path.join(ROOT, 'bin/parlor.js'), ['start'], {
    // As a user runs it (its own line's flags), with an inspector for the profiled run.
    env: { ...env, NODE_OPTIONS: '--inspect=127.0.0.1:0' },
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (c: Buffer) => (out = (out + String(c)).slice(-20_000)));
  child.stderr!.on('data', (c: Buffer) => (out = (out + String(c)).slice(-20_000)));
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`parlor start exited (${child.exitCode}): ${out}`);
    if (Date.now() > deadline) throw new Error(`parlor start did not become healthy: ${out}`);
    const ok = await fetch(`http://127.0.0.1:${port}/healthz`).then((r) => r.ok, () => false);
    if (ok) break;
    await sleep(100);
  }
  const inspector = /Debugger listening on (ws:\/\/\S+)/.exec(out)?.[1];
  if (!inspector) throw new Error(`no inspector address in parlor start's output: ${out}`);
  return { child, inspector, output: () => out };
}

async function stopChild(child: ChildProcess) {
  if (child.exitCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  await Promise.race([exited, sleep(15_000).then(() => child.kill('SIGKILL'))]);
}

interface Figures {
  label: string;
  n: number;
  p50: number;
  p99: number;
  rate: number;
  /** CPU per DM of this process (the emulator, the forwarder, the fake model) and of the floor's bot, ms. */
  benchCpu: number;
  echoCpu?: number;
  /** How busy the machine's cores were through the run, %. */
  machineBusy?: number;
  /** The Bot API calls the bot made, per DM, by method. */
  calls: Map<string, number>;
}

/** One round's figures against the aims: the burst's share of the floor's, the isolated DM over the floor, CPU per DM. */
interface RoundFigures {
  share: number;
  overFloor: number;
  cpuBurst?: number;
  cpuIsolated?: number;
  floorRate: number;
}
const ROUND_COLUMNS: [string, keyof RoundFigures, number][] = [
  ['burst share %', 'share', 0],
  ['floor DMs/s', 'floorRate', 0],
  ['over floor ms', 'overFloor', 1],
  ['CPU burst ms', 'cpuBurst', 1],
  ['CPU one ms', 'cpuIsolated', 1],
];
const fixed = (v: number | undefined, digits: number) => (v === undefined ? '-' : v.toFixed(digits)).padStart(14);
/** CPU per DM of Parlor and Postgres together. */
const together = (c: { parlorCpu?: number; postgresCpu?: number }) => (c.parlorCpu !== undefined && c.postgresCpu !== undefined ? c.parlorCpu + c.postgresCpu : undefined);
function roundFigures(floorBurst: Figures, parlorBurst: { result: Figures; costs: Costs }, floorOne: Figures, parlorOne: { result: Figures; costs: Costs }): RoundFigures {
  return {
    share: (parlorBurst.result.rate / floorBurst.rate) * 100,
    floorRate: floorBurst.rate,
    overFloor: parlorOne.result.p50 - floorOne.p50,
    cpuBurst: together(parlorBurst.costs),
    cpuIsolated: together(parlorOne.costs),
  };
}

function line(f: Figures) {
  return (
    `${f.label.padEnd(40)} n=${String(f.n).padEnd(4)} p50 ${f.p50.toFixed(1).padStart(6)} ms  p99 ${f.p99.toFixed(1).padStart(6)} ms  ${f.rate.toFixed(0).padStart(4)} DMs/s` +
    `  bench CPU ${f.benchCpu.toFixed(1)} ms/DM${f.echoCpu === undefined ? '' : `, floor bot ${f.echoCpu.toFixed(1)}`}` +
    `${f.machineBusy === undefined ? '' : `; cores ${f.machineBusy.toFixed(0)} % busy`}` +
    `; Bot API calls per DM: ${[...f.calls].map(([method, n]) => `${method} ${n.toFixed(2)}`).join(', ') || 'none'}`
  );
}

/** This process's CPU (user and system), ms. */
const ownCpuMs = () => {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1000;
};

/** What the Parlor process and Postgres spent over a run, per DM. */
interface Costs {
  dms: number;
  parlorCpu?: number;
  /** Of which on its main thread (its JavaScript) and on the others (V8 compiling and collecting, libuv's pool). */
  parlorThreads?: { main: number; background: number };
  postgresCpu?: number;
  /** Postgres's CPU per DM by kind of process. */
  postgresCpuByKind?: Map<string, number>;
  statements?: Awaited<ReturnType<typeof readStatements>>;
  writingTransactions: number;
  walFlushes?: number;
}

async function main() {
  const database = await createBenchDatabase({ statements: true });
  onFailure.push(() => database.drop());
  const admin = postgres(database.url, { max: 1, onnotice: () => {} });
  // pg_stat_statements tracks nothing in the measured runs (it costs Postgres CPU a user's server does not spend); the
  // statement figures come from runs of their own after them (see statementsOf).
  const tracked = database.statements && (await trackStatements(admin, false));

  const emulator = new TelegramServer({ port: 0, host: '127.0.0.1', storeTimeout: 600 });
  await emulator.start();
  const apiRoot = emulator.config.apiURL;
  // The Bot API calls each bot makes (/bot<token>/<method>), by method: what a DM costs the platform, and the emulator.
  const apiCalls = new Map<string, Map<string, number>>();
  (emulator as unknown as { server: import('node:http').Server }).server.on('request', (req: import('node:http').IncomingMessage) => {
    const [, token, method] = /^\/bot([^/]+)\/([^/?]+)/.exec(req.url ?? '') ?? [];
    if (!token || !method) return;
    const byMethod = apiCalls.get(token) ?? apiCalls.set(token, new Map()).get(token)!;
    byMethod.set(method, (byMethod.get(method) ?? 0) + 1);
  });

  // Replies arrive as bot messages on the emulator; resolve whoever waits for that chat.
  const waiting = new Map<string, () => void>();
  emulator.on('AddedBotMessage', () => {
    const last = emulator.storage.botMessages[emulator.storage.botMessages.length - 1];
    const key = `${last.botToken}:${last.message.chat_id}`;
    waiting.get(key)?.();
    waiting.delete(key);
  });
  // The emulator keeps every message for `storeTimeout` seconds, and the fake model every request it had: keep their
  // lists short between runs (a growing heap in this process would tax only the runs that use the model).
  const forget = () => {
    emulator.storage.botMessages.length = 0;
    emulator.storage.userMessages.length = 0;
    fake.requests.length = 0;
  };

  // When each DM's model request reached the fake model, by chat: splits the latency of an isolated DM in two.
  const fake = await startFakeLlm();
  const modelAt = new Map<string, number>();
  fake.setDefault((req) => {
    const chat = /from (\d+)$/.exec(req.lastUserText)?.[1];
    if (chat) modelAt.set(chat, performance.now());
    return { text: `ok ${req.lastUserText}` };
  });

  // The emulator sends no secret header, and hands concurrent updates the same update_id (it increments after the
  // webhook answers), so a small forwarder adds the header and numbers updates uniquely, as Telegram does. The floor's
  // updates take the same way (under ECHO_PATH), so both pay the same transport.
  let nextUpdateId = 1;
  const parlorPort = await freePort();
  let echoPort = 0;
  const forwarder = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = Buffer.from(JSON.stringify({ ...JSON.parse(Buffer.concat(chunks).toString()), update_id: nextUpdateId++ }));
    const toEcho = req.url === ECHO_PATH;
    const out = request(
      {
        host: '127.0.0.1',
        port: toEcho ? echoPort : parlorPort,
        path: toEcho ? '/' : req.url,
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

  const users = Array.from({ length: CHATS }, (_, i) => `telegram:${5000 + i}`);
  const personasDir = await writePersonas({ bench: { connectors: { users } } });
  const home = await fs.mkdtemp(path.join(os.tmpdir(), 'parlor-bench-home-'));
  const parlor = await startParlor(
    {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      DATABASE_URL: database.parlorUrl,
      LLM_BASE_URL: fake.openaiBaseUrl,
      LLM_MODEL: 'fake-model',
      PARLOR_PERSONAS_DIR: personasDir,
      PARLOR_HOME: home,
      PARLOR_HTTP_PORT: String(parlorPort),
      TELEGRAM_BOT_TOKEN: PARLOR_TOKEN,
      TELEGRAM_API_ROOT: apiRoot,
      TELEGRAM_WEBHOOK_URL: `http://127.0.0.1:${forwarderPort}`,
      LOG_LEVEL: process.env.LOG_LEVEL ?? 'warn',
      ...(process.env.PARLOR_TURN_CONCURRENCY ? { PARLOR_TURN_CONCURRENCY: process.env.PARLOR_TURN_CONCURRENCY } : {}),
    },
    parlorPort,
  );
  const parlorPid = parlor.child.pid!;
  onFailure.unshift(() => stopChild(parlor.child));
  const rssAtStart = processRssMb(parlorPid);

  // The floor, a process of its own too.
  const echo = fork(path.join(import.meta.dirname, 'telegram-echo-bot.ts'), [], {
    execArgv: ['--import', 'tsx'],
    env: { ...process.env, ECHO_TOKEN, ECHO_API_ROOT: apiRoot },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  onFailure.unshift(() => stopChild(echo));
  echoPort = await new Promise<number>((resolve) => echo.once('message', (m) => resolve((m as { port: number }).port)));
  emulator.setWebhook({ url: `http://127.0.0.1:${forwarderPort}${ECHO_PATH}` } as never, ECHO_TOKEN);

  /**
   * From now, what this process and (for the floor's DMs) the floor's bot spend, per DM once `dms` were sent, and how
   * busy the machine's cores were (near 100 %: the run was bound by CPU, which everything here shares).
   */
  function cpuMeter(token: string) {
    const own0 = ownCpuMs();
    const echo0 = processCpuMs(echo.pid!);
    const machine0 = machineCpuTicks();
    const calls0 = new Map(apiCalls.get(token) ?? []);
    return (dms: number) => {
      const echo1 = processCpuMs(echo.pid!);
      const machine1 = machineCpuTicks();
      const echoCpu = token === ECHO_TOKEN && echo0 !== undefined && echo1 !== undefined ? (echo1 - echo0) / dms : undefined;
      const machineBusy = machine0 && machine1 && machine1.total > machine0.total ? ((machine1.busy - machine0.busy) / (machine1.total - machine0.total)) * 100 : undefined;
      const calls = new Map([...(apiCalls.get(token) ?? [])].map(([method, n]) => [method, (n - (calls0.get(method) ?? 0)) / dms] as const).filter(([, n]) => n > 0));
      return { benchCpu: (ownCpuMs() - own0) / dms, echoCpu, machineBusy, calls };
    };
  }

  /** Each chat sends `perChat` DMs, each after the reply to the one before. */
  async function burst(token: string, label: string, chats = CHATS, perChat = PER_CHAT): Promise<Figures> {
    const samples: number[] = [];
    const started = performance.now();
    const cpu = cpuMeter(token);
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
    const spent = cpu(samples.length);
    forget();
    const s = samples.sort((a, b) => a - b);
    return { label, n: s.length, p50: percentile(s, 50), p99: percentile(s, 99), rate: s.length / (elapsed / 1000), ...spent };
  }

  /** One DM in flight, going round the chats (one chat sending without pause would measure per-chat pacing). */
  async function isolated(token: string, label: string, count = ISOLATED): Promise<Figures & { toModel: number[]; fromModel: number[] }> {
    const samples: number[] = [];
    const toModel: number[] = [];
    const fromModel: number[] = [];
    const started = performance.now();
    const cpu = cpuMeter(token);
    for (let n = 0; n < count; n++) {
      const userId = 5000 + (n % CHATS);
      const client = emulator.getClient(token, { userId, chatId: userId, type: 'private', firstName: 'U', userName: `u${n}` });
      const replied = new Promise<void>((resolve) => waiting.set(`${token}:${userId}`, resolve));
      modelAt.delete(String(userId));
      const t0 = performance.now();
      await client.sendMessage(client.makeMessage(`isolated ${n} from ${userId}`));
      await replied;
      const t1 = performance.now();
      samples.push(t1 - t0);
      const atModel = modelAt.get(String(userId));
      if (atModel !== undefined) {
        toModel.push(atModel - t0);
        fromModel.push(t1 - atModel);
      }
    }
    const elapsed = performance.now() - started;
    const spent = cpu(samples.length);
    forget();
    const s = samples.sort((a, b) => a - b);
    return { label, n: s.length, p50: percentile(s, 50), p99: percentile(s, 99), rate: s.length / (elapsed / 1000), ...spent, toModel, fromModel };
  }

  /** The statements Postgres ran for `fn`'s DMs, counted by pg_stat_statements (tracking only meanwhile). */
  async function statementsOf(fn: () => Promise<unknown>): Promise<Costs['statements']> {
    if (!tracked || !(await trackStatements(admin, true))) return undefined;
    await resetStatements(admin);
    await fn();
    const statements = await readStatements(admin);
    await trackStatements(admin, false);
    return statements;
  }

  /** Runs `fn` (which sends `dms` DMs to Parlor) and measures what Parlor and Postgres spent on them. */
  async function measured<T>(dms: number, fn: () => Promise<T>): Promise<{ result: T; costs: Costs }> {
    await sleep(1200); // for pg_stat_io (see walFlushes)
    const wal0 = await walFlushes(admin);
    const xid0 = await nextTransactionId(admin);
    const cpu0 = processCpuMs(parlorPid);
    const threads0 = threadsCpuMs(parlorPid);
    const pg0 = postgresCpuSample(database.dataDir);
    const result = await fn();
    const cpu1 = processCpuMs(parlorPid);
    const threads1 = threadsCpuMs(parlorPid);
    const pg1 = postgresCpuSample(database.dataDir);
    const pg = postgresCpuBetween(pg0, pg1);
    const xid1 = await nextTransactionId(admin);
    await sleep(1200);
    const wal1 = await walFlushes(admin);
    return {
      result,
      costs: {
        dms,
        parlorCpu: cpu0 !== undefined && cpu1 !== undefined ? (cpu1 - cpu0) / dms : undefined,
        parlorThreads: threadsCpuPerDm(threads0, threads1, dms),
        postgresCpu: pg && pg.total / dms,
        postgresCpuByKind: pg && new Map([...pg.byKind].map(([kind, ms]) => [kind, ms / dms])),
        writingTransactions: (xid1 - xid0 - 1) / dms, // less the one nextTransactionId's snapshot does not take
        walFlushes: wal0 !== undefined && wal1 !== undefined ? (wal1 - wal0) / dms : undefined,
      },
    };
  }

  console.log(
    `Telegram end to end on the Bot API emulator (update posted → reply received), fake model answering at once; ` +
      `parlor start (${(await parlorRunsBundle()) ? 'the bundle' : 'the sources through tsx'}) and the floor as processes of their own (${os.cpus().length} cores, Node ${process.version})`,
  );
  // Every chat has its conversation before the measured runs, and both processes have run their paths long enough for
  // V8 to have compiled them: the runs measure the steady state of a process that has been up a while. V8 optimises a
  // function once it has run often enough, and many of a turn's run once per DM: through the first thousand or two
  // DMs, its background threads compile (about a millisecond per isolated DM after one round). Printed per round.
  const warmUp: string[] = [];
  const [warmUpPerChat, warmUpIsolated] = [2, 20];
  const warmUpDms = CHATS * warmUpPerChat + warmUpIsolated;
  for (let round = 0; round < WARM_UP_ROUNDS; round++) {
    await burst(ECHO_TOKEN, 'warm-up (floor)');
    await isolated(ECHO_TOKEN, 'warm-up (floor)', warmUpIsolated);
    const before = threadsCpuMs(parlorPid);
    await burst(PARLOR_TOKEN, 'warm-up (Parlor)', CHATS, warmUpPerChat);
    await isolated(PARLOR_TOKEN, 'warm-up (Parlor)', warmUpIsolated);
    const spent = threadsCpuPerDm(before, threadsCpuMs(parlorPid), warmUpDms);
    if (spent) warmUp.push(`${spent.main.toFixed(1)}+${spent.background.toFixed(1)}`);
  }
  if (warmUp.length) console.log(`warm-up: ${WARM_UP_ROUNDS} rounds of ${warmUpDms} DMs; Parlor's CPU per DM in each (main thread + other threads, ms): ${warmUp.join(', ')}`);
  // Parlor keeps Telegram's flood limit of about a message a second per chat (a chat may have 3 at once, then waits):
  // the measured burst starts with every chat rested, as when a hundred chats write at once, not with the buckets the
  // warm-ups emptied (which held replies back: the cores sat idle while they waited).
  await sleep(CHAT_REST_MS);

  const floorBurst = await burst(ECHO_TOKEN, `floor, ${CHATS} chats × ${PER_CHAT}`);
  // Parlor's memory through the burst, sampled: what its peak is made of.
  const inspector = await connectProfiler(parlor.inspector);
  let peakMemory: Awaited<ReturnType<typeof inspector.memory>> | undefined;
  let sampling = true;
  const memorySampler = (async () => {
    while (sampling) {
      const now = await inspector.memory().catch(() => undefined);
      if (now && now.rss > (peakMemory?.rss ?? 0)) peakMemory = now;
      await sleep(100);
    }
  })();
  // BENCH_ALLOCATIONS=N: the N functions that allocate the most in the burst (sampled; it slows the burst a little).
  const allocationsTop = Number(process.env.BENCH_ALLOCATIONS ?? 0);
  if (allocationsTop) await inspector.startAllocations();
  // The peak of this burst alone: start-up and the warm-ups (when the code is compiled) peak apart from it.
  const rssBeforeBurst = processRssMb(parlorPid);
  const peakReset = resetPeakRss(parlorPid);
  const parlorBurst = await measured(CHATS * PER_CHAT, () => burst(PARLOR_TOKEN, `Parlor, ${CHATS} chats × ${PER_CHAT}`));
  sampling = false;
  await memorySampler;
  const allocations = allocationsTop ? await inspector.stopAllocations() : undefined;
  inspector.close();
  const rssAfterBurst = processRssMb(parlorPid);
  const floorOne = await isolated(ECHO_TOKEN, 'floor, isolated DMs');
  const parlorOne = await measured(ISOLATED, () => isolated(PARLOR_TOKEN, 'Parlor, isolated DMs'));
  await sleep(CHAT_REST_MS);
  // BENCH_REPEAT=N: N more rounds of the four runs above, each the same way: on a machine whose speed drifts (a shared
  // one), one round's figures vary by a third; the median of several says more.
  const rounds = [roundFigures(floorBurst, parlorBurst, floorOne, parlorOne)];
  for (let round = 0; round < REPEAT; round++) {
    await sleep(CHAT_REST_MS);
    const fb = await burst(ECHO_TOKEN, 'floor, again');
    const pb = await measured(CHATS * PER_CHAT, () => burst(PARLOR_TOKEN, 'Parlor, again'));
    const fo = await isolated(ECHO_TOKEN, 'floor, again');
    const po = await measured(ISOLATED, () => isolated(PARLOR_TOKEN, 'Parlor, again'));
    rounds.push(roundFigures(fb, pb, fo, po));
  }
  parlorBurst.costs.statements = await statementsOf(() => burst(PARLOR_TOKEN, 'statements of a burst'));
  parlorOne.costs.statements = await statementsOf(() => isolated(PARLOR_TOKEN, 'statements of isolated DMs'));
  // BENCH_PERF=path: one more burst under a system-wide `perf record` (every process: the bench, Parlor, Postgres's
  // backends, the kernel's share), written to that path; its split by process and by library is printed below.
  const perfFile = process.env.BENCH_PERF;
  const perfSplit = perfFile
    ? await underPerf(perfFile, { Parlor: parlorPid, 'the bench (emulator, forwarder, fake model)': process.pid, 'the floor\'s bot': echo.pid! }, () =>
        burst(PARLOR_TOKEN, 'under perf'),
      )
    : undefined;

  console.log('\nlatency and throughput');
  for (const f of [floorBurst, parlorBurst.result, floorOne, parlorOne.result]) console.log(`  ${line(f)}`);
  console.log(`  burst throughput: ${((parlorBurst.result.rate / floorBurst.rate) * 100).toFixed(0)} % of the floor's (aim ≥ 50 %)`);
  console.log(
    `  isolated DM: ${(parlorOne.result.p50 - floorOne.p50).toFixed(1)} ms over the floor at p50 (aim ≤ 10 ms); ` +
      `update → model request p50 ${percentile([...parlorOne.result.toModel].sort((a, b) => a - b), 50).toFixed(1)} ms, ` +
      `model request → reply at the emulator p50 ${percentile([...parlorOne.result.fromModel].sort((a, b) => a - b), 50).toFixed(1)} ms`,
  );

  if (rounds.length > 1) {
    console.log(`\n${rounds.length} rounds of the same runs (the first is the one above), and their median`);
    console.log(`  ${'round'.padEnd(8)} ${ROUND_COLUMNS.map(([name]) => name.padStart(14)).join('')}`);
    rounds.forEach((r, i) => console.log(`  ${String(i + 1).padEnd(8)} ${ROUND_COLUMNS.map(([, key, digits]) => fixed(r[key], digits)).join('')}`));
    const median = (key: keyof RoundFigures) => {
      const values = rounds.map((r) => r[key]).filter((v): v is number => v !== undefined).sort((a, b) => a - b);
      return values.length ? percentile(values, 50) : undefined;
    };
    console.log(`  ${'median'.padEnd(8)} ${ROUND_COLUMNS.map(([, key, digits]) => fixed(median(key), digits)).join('')}`);
  }

  console.log('\nper DM                                       burst   isolated');
  const row = (label: string, pick: (c: Costs) => number | undefined, digits = 1) =>
    console.log(
      `  ${label.padEnd(42)} ${[parlorBurst.costs, parlorOne.costs].map((c) => (pick(c) === undefined ? '     -' : pick(c)!.toFixed(digits).padStart(6))).join('    ')}`,
    );
  row('Parlor CPU, ms', (c) => c.parlorCpu);
  row('  main thread (its JavaScript)', (c) => c.parlorThreads?.main);
  row('  other threads (V8 compiling, GC helpers)', (c) => c.parlorThreads?.background);
  row('Postgres CPU, ms (all its processes)', (c) => c.postgresCpu);
  const kinds = [...(parlorBurst.costs.postgresCpuByKind ?? new Map<string, number>())].sort((a, b) => b[1] - a[1]).map(([kind]) => kind);
  for (const kind of kinds) row(`  ${kind}`, (c) => c.postgresCpuByKind?.get(kind) ?? 0);
  row('  together (aim ≤ 5 ms)', together);
  const isBoss = (q: string) => /"?pgboss"?\./i.test(q);
  const isTxControl = (q: string) => /^\s*(begin|commit|rollback|savepoint|release)/i.test(q);
  const calls = (c: Costs, keep: (q: string) => boolean) => c.statements && c.statements.byQuery.filter((r) => keep(r.query)).reduce((n, r) => n + r.calls, 0) / c.dms;
  row('SQL statements', (c) => c.statements && c.statements.calls / c.dms);
  row('  of which pg-boss’s', (c) => calls(c, isBoss));
  row('  of which BEGIN / COMMIT / ROLLBACK', (c) => calls(c, isTxControl));
  row('  of which Parlor’s own', (c) => calls(c, (q) => !isBoss(q) && !isTxControl(q)));
  row('writing transactions', (c) => c.writingTransactions);
  row('WAL flushes (fsyncs)', (c) => c.walFlushes);
  row('SQL execution time in Postgres, ms', (c) => c.statements && c.statements.ms / c.dms, 2);
  row('SQL planning time in Postgres, ms', (c) => c.statements && c.statements.planMs / c.dms, 2);
  if (!database.statements) console.log('  (pg_stat_statements is not available on this server: no statement figures)');
  else if (!tracked) console.log('  (pg_stat_statements cannot be turned off and on here: no statement figures)');
  else console.log('  (the statement figures are from a burst and isolated DMs of their own, after the measured ones: counting them costs Postgres CPU)');
  for (const [name, costs] of [['the burst', parlorBurst.costs], ['the isolated DMs', parlorOne.costs]] as const) {
    if (!costs.statements) continue;
    console.log(`\n  statements of ${name}, per DM (calls, mean ms executing, mean ms planning, % of calls planned)`);
    for (const r of costs.statements.byQuery.slice(0, 40)) {
      const perDm = r.calls / costs.dms;
      if (perDm < 0.05) continue;
      const planned = `${((r.plans / r.calls) * 100).toFixed(0)} %`;
      console.log(`    ${perDm.toFixed(2).padStart(6)}  ${(r.ms / r.calls).toFixed(3).padStart(7)}  ${(r.planMs / r.calls).toFixed(3).padStart(7)}  ${planned.padStart(5)}  ${statementLabel(r.query)}`);
    }
  }

  if (PROFILE) {
    // A second burst under the sampling profiler (which slows it a little): where Parlor's CPU goes, by package.
    const profiler = await connectProfiler(parlor.inspector);
    await profiler.start();
    const cpu0 = processCpuMs(parlorPid)!;
    const dms = PROFILE_ISOLATED ? ISOLATED : CHATS * PER_CHAT;
    await (PROFILE_ISOLATED ? isolated(PARLOR_TOKEN, 'profiled') : burst(PARLOR_TOKEN, 'profiled'));
    const cpu = (processCpuMs(parlorPid)! - cpu0) / dms;
    const profile = await profiler.stop();
    profiler.close();
    // BENCH_PROFILE_FILE=path: the raw profile too (a .cpuprofile that DevTools opens).
    if (process.env.BENCH_PROFILE_FILE) await fs.writeFile(process.env.BENCH_PROFILE_FILE, JSON.stringify(profile));
    const { self, inclusive, functions, sampledMs } = summariseProfile(profile);
    console.log(`\nParlor's CPU in profiled ${PROFILE_ISOLATED ? 'isolated DMs' : 'burst'}, ms per DM (${cpu.toFixed(1)} ms by /proc; ${(sampledMs / dms).toFixed(1)} ms on the main thread's samples)`);
    console.log('  self = in the area\'s own functions; on stack = with everything it called');
    console.log(`  ${'area'.padEnd(46)}   self  on stack`);
    for (const [area, ms] of [...self].sort((a, b) => b[1] - a[1])) {
      if (ms / dms < 0.02) continue;
      console.log(`  ${area.padEnd(46)} ${(ms / dms).toFixed(2).padStart(6)}  ${inclusive.has(area) ? (inclusive.get(area)! / dms).toFixed(2).padStart(6) : '     -'}`);
    }
    const top = Number(process.env.BENCH_PROFILE_TOP ?? 0);
    if (top) {
      console.log(`  the ${top} functions with the most self time, ms per DM`);
      for (const [fn, ms] of [...functions].sort((a, b) => b[1] - a[1]).slice(0, top)) console.log(`    ${(ms / dms).toFixed(2).padStart(6)}  ${fn}`);
    }
  }
  if (perfSplit) console.log(`\nthe machine's busy CPU in a burst under perf (${perfFile}; perf report -i it for functions), by who took it\n${perfSplit}`);
  const rss = processRssMb(parlorPid);
  console.log(
    `\npeak RSS of parlor start: ${rssAfterBurst?.peak.toFixed(0) ?? '-'} MB ${peakReset ? 'in the burst' : 'after the burst'} (aim ≤ 150 MB; ` +
      `${rssBeforeBurst?.peak.toFixed(0) ?? '-'} MB before it, through the warm-ups, ${rssAtStart?.peak.toFixed(0) ?? '-'} MB once started), ${rss?.peak.toFixed(0) ?? '-'} MB at the end` +
      `${PROFILE ? ' (with the profiler)' : ''}; now ${rss?.now.toFixed(0) ?? '-'} MB`,
  );
  if (allocations) {
    const total = [...allocations.values()].reduce((a, b) => a + b, 0);
    console.log(`  allocated in the burst: ${(total / 1024 / CHATS / PER_CHAT).toFixed(0)} KB per DM; the ${allocationsTop} functions that allocate most, KB per DM`);
    for (const [site, bytes] of [...allocations].sort((a, b) => b[1] - a[1]).slice(0, allocationsTop)) {
      console.log(`    ${(bytes / 1024 / CHATS / PER_CHAT).toFixed(1).padStart(7)}  ${site}`);
    }
  }
  if (peakMemory) {
    const m = peakMemory;
    console.log(
      `  at its sampled peak in the burst, RSS ${m.rss.toFixed(0)} MB: V8 heap ${m.heapTotal.toFixed(0)} MB (${m.heapUsed.toFixed(0)} in use), ` +
        `outside it (buffers) ${m.external.toFixed(0)} MB, the rest (code, stacks, malloc, the node binary) ${(m.rss - m.heapTotal - m.external).toFixed(0)} MB`,
    );
  }

  await stopChild(parlor.child);
  echo.disconnect();
  await stopChild(echo);
  await new Promise((r) => forwarder.close(r));
  await emulator.stop();
  await fake.close();
  await admin.end();
  await database.drop();
  await fs.rm(personasDir, { recursive: true, force: true });
  await fs.rm(home, { recursive: true, force: true });
}

/** The thread ids of a running process. */
async function threadsOf(pid: number): Promise<Set<number>> {
  return new Set((await fs.readdir(`/proc/${pid}/task`).catch(() => [] as string[])).map(Number));
}

/**
 * Runs `fn` under a system-wide `perf record -g` and splits the busy samples (not the idle task's) by who took them:
 * `processes` by pid, Postgres by its name, the rest as other; each with the kernel's part (system calls, the network
 * stack, waking and switching tasks).
 */
async function underPerf(file: string, processes: Record<string, number>, fn: () => Promise<unknown>): Promise<string> {
  const perf = spawn('perf', ['record', '-a', '-g', '-F', '2000', '-o', file], { stdio: ['ignore', 'ignore', 'pipe'] });
  let said = '';
  perf.stderr!.on('data', (d: Buffer) => (said += d.toString()));
  const exited = new Promise<number | null>((r) => perf.on('close', r));
  const spawnError = new Promise<string>((r) => perf.on('error', (err) => r(err.message)));
  await sleep(300);
  await fn();
  const tids = await Promise.all(Object.entries(processes).map(async ([name, pid]) => [name, await threadsOf(pid)] as const));
  perf.kill('SIGINT');
  const code = await Promise.race([exited, spawnError]);
  if (code !== 0 && !/Captured and wrote/.test(said)) return `  (perf did not record: ${typeof code === 'string' ? code : said.trim().split('\n').pop()})`;
  const { stdout: report } = await execa('perf', ['report', '-i', file, '--stdio', '--no-children', '--sort', 'pid,dso', '--percent-limit', '0', '-g', 'none'], { reject: false });
  const shares = new Map<string, { all: number; kernel: number }>();
  for (const line of report.split('\n')) {
    const m = /^\s*([\d.]+)%\s+(\d+):(\S+)\s+(.+?)\s*$/.exec(line);
    if (!m || m[2] === '0') continue;
    const [tid, comm, dso] = [Number(m[2]), m[3], m[4]];
    const who = tids.find(([, set]) => set.has(tid))?.[0] ?? (comm === 'postgres' ? 'Postgres' : 'other');
    const share = shares.get(who) ?? shares.set(who, { all: 0, kernel: 0 }).get(who)!;
    share.all += Number(m[1]);
    if (dso.includes('kernel')) share.kernel += Number(m[1]);
  }
  const busy = [...shares.values()].reduce((n, s) => n + s.all, 0);
  if (busy === 0) return '  (perf recorded no samples)';
  return [...shares]
    .sort((a, b) => b[1].all - a[1].all)
    .map(([who, s]) => `  ${who.padEnd(46)} ${((s.all / busy) * 100).toFixed(0).padStart(3)} %   of it in the kernel ${((s.kernel / busy) * 100).toFixed(0).padStart(3)} %`)
    .join('\n');
}

/** Whether bin/parlor.js runs the bundle (it is newer than every source) rather than the sources. */
async function parlorRunsBundle(): Promise<boolean> {
  const newest = async (dir: string): Promise<number> => {
    let n = 0;
    for (const entry of await fs.readdir(dir, { withFileTypes: true })) {
      const p = path.join(dir, entry.name);
      n = Math.max(n, entry.isDirectory() ? await newest(p) : (await fs.stat(p)).mtimeMs);
    }
    return n;
  };
  try {
    const built = (await fs.stat(path.join(ROOT, 'dist/parlor.mjs'))).mtimeMs;
    for (const dir of ['src', 'connectors', 'tools']) if ((await newest(path.join(ROOT, dir))) > built) return false;
    return process.env.PARLOR_FROM_SOURCE !== '1';
  } catch {
    return false;
  }
}

/** What a run that fails part way stops, so no `parlor start` or Postgres outlives it. */
const onFailure: (() => Promise<unknown>)[] = [];

async function fail(err: unknown): Promise<never> {
  console.error('the benchmark failed:', err);
  for (const stop of onFailure) await stop().catch(() => {});
  process.exit(1);
}
// An error no await catches (the emulator's webhook client when a bot's process is gone) ends the run the same way.
process.on('unhandledRejection', (err) => void fail(err));
process.on('uncaughtException', (err) => void fail(err));

try {
  await main();
} catch (err) {
  await fail(err);
}
process.exit(0);
