// Reminder burst: 200 reminders due within the same second across 20 personas, each with its own chat
// (10 reminders a chat). When one fires, the fake model answers in one response with two parallel tool calls,
// reply_to_origin {text: <reminder name>} and end_task. Lateness = when the connector's send got the message − the
// reminder's dueAt. Runs once with the default worker concurrency and once with a higher one. Prints figures;
// asserts nothing. `npx tsx test/bench/reminders.ts` (embedded Postgres unless DATABASE_URL / TEST_DATABASE_URL).
//
// Knobs: BENCH_PERSONAS (20), BENCH_PER_PERSONA (10), BENCH_SPREAD_MS (1000: due times spread evenly over this
// much; 0 = all at one instant), BENCH_LEAD_MS (3000: how far ahead the burst is due), BENCH_CONCURRENCY
// ("default,16": turn worker concurrency of each run), LOG_LEVEL (warn).
import fs from 'node:fs/promises';
import os from 'node:os';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import pino from 'pino';
import { sql } from 'drizzle-orm';
import { startApp, type App } from '../../src/app.ts';
import { parseSettings } from '../../src/config/env.ts';
import type { OutboundMessage } from '../../src/connector.ts';
import { chatConversationId } from '../../src/conversation-id.ts';
import { stableUuid } from '../../src/jobs/stable-uuid.ts';
import { DEFAULT_TURN_CONCURRENCY, TURN_POLL_SECONDS } from '../../src/jobs/workers.ts';
import { startFakeLlm, type FakeHandler } from '../support/fake-llm.ts';
import { writePersonas } from '../support/harness.ts';
import { createRecordingConnector } from '../support/recording-connector.ts';
import { createBuiltinTools } from '../../tools/index.ts';
import { createBenchDatabase, percentile } from './support.ts';

const PERSONAS = Number(process.env.BENCH_PERSONAS ?? 20);
const PER_PERSONA = Number(process.env.BENCH_PER_PERSONA ?? 10);
const SPREAD_MS = Number(process.env.BENCH_SPREAD_MS ?? 1000);
const LEAD_MS = Number(process.env.BENCH_LEAD_MS ?? 3000);
const CONCURRENCIES = (process.env.BENCH_CONCURRENCY ?? 'default,16').split(',').map((c) => (c.trim() === 'default' ? undefined : Number(c)));
const AIM_P99_MS = 1000;
/** After the last expected delivery, how long to keep listening for duplicates. */
const LINGER_MS = 3000;
/** Give up waiting for missing deliveries this long after the last due time. */
const GIVE_UP_MS = 60_000;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const REMINDER = /\[reminder "([^"]+)"\]/g;

/**
 * A fired reminder's turn: the reminder's name back to the chat with reply_to_origin (reminders of a chat that fall
 * due together arrive in one turn: a line each), and end_task, in one response.
 */
const firedTurn: FakeHandler = (req) => {
  const names = [...req.lastUserText.matchAll(REMINDER)].map((m) => m[1]);
  if (!names.length) return { toolCalls: [{ name: 'end_task', arguments: { status: 'skipped' } }] };
  // One message a turn (reply_to_origin sends at most one): a line for each.
  return {
    toolCalls: [
      { name: 'reply_to_origin', arguments: { text: names.join('\n') } },
      { name: 'end_task', arguments: { status: 'ok' } },
    ],
  };
};

interface Delivery {
  at: number;
  chat: string;
  text: string;
}

function stats(samples: number[]) {
  const s = [...samples].sort((a, b) => a - b);
  if (s.length === 0) return { p50: NaN, p95: NaN, p99: NaN, max: NaN, min: NaN };
  return { p50: percentile(s, 50), p95: percentile(s, 95), p99: percentile(s, 99), max: s[s.length - 1], min: s[0] };
}
const ms = (n: number) => (Number.isFinite(n) ? `${n.toFixed(0)}`.padStart(6) : '     -');

/** Busy and total CPU time of the whole machine so far (Linux), to tell a saturated machine from waiting. */
async function machineCpu(): Promise<{ busy: number; total: number } | undefined> {
  try {
    const [cpu] = (await fs.readFile('/proc/stat', 'utf8')).split('\n');
    const f = cpu.trim().split(/\s+/).slice(1).map(Number);
    const total = f.reduce((a, b) => a + b, 0);
    return { busy: total - f[3] - (f[4] ?? 0), total }; // idle and iowait are not busy
  } catch {
    return undefined;
  }
}

/** The settings of the app's workers: its turn workers (as it was started) and pg-boss's reminder worker. */
function workerSettings(app: App, concurrency: number | undefined) {
  const reminder = app.jobs.boss.getWipData().find((w) => w.name === 'reminder');
  const opts = (reminder?.options ?? {}) as { batchSize?: number; pollingIntervalSeconds?: number };
  return {
    turnWorkers: concurrency ?? DEFAULT_TURN_CONCURRENCY,
    turnPollSeconds: TURN_POLL_SECONDS,
    reminderBatch: opts.batchSize,
    reminderPollSeconds: opts.pollingIntervalSeconds,
  };
}

async function runOnce(databaseUrl: string, fake: Awaited<ReturnType<typeof startFakeLlm>>, run: number, concurrency: number | undefined) {
  const personaNames = Array.from({ length: PERSONAS }, (_, i) => `r${run}-p${String(i).padStart(2, '0')}`);
  const chatOf = (persona: string) => `${persona}-chat`;
  const personasDir = await writePersonas(
    Object.fromEntries(
      personaNames.map((name) => [
        name,
        { soul: 'You are a benchmark persona.', connectors: { users: [`chat:${chatOf(name)}`], primary: { connector: 'chat', to: chatOf(name) } } },
      ]),
    ),
  );
  const settings = parseSettings({
    DATABASE_URL: databaseUrl,
    LLM_BASE_URL: fake.openaiBaseUrl,
    LLM_MODEL: 'fake-model',
    PARLOR_PERSONAS_DIR: personasDir,
  });

  // The recording connector, with the moment each message reached its send().
  const chat = createRecordingConnector('chat');
  const deliveries: Delivery[] = [];
  const recordSend = chat.send.bind(chat);
  chat.send = async (message: OutboundMessage) => {
    const at = Date.now();
    for (const line of message.text.split('\n')) deliveries.push({ at, chat: message.chat, text: line });
    return recordSend(message);
  };

  fake.reset();
  fake.setDefault(firedTurn);
  const app = await startApp({
    settings,
    log: pino({ level: process.env.LOG_LEVEL ?? 'warn' }),
    worker: true,
    ...(concurrency !== undefined ? { workerConcurrency: concurrency } : {}),
    connectors: () => [chat],
  });

  const w = workerSettings(app, concurrency);
  console.log(
    `\nrun ${run}: worker concurrency ${concurrency ?? 'default'} → ${w.turnWorkers} turn workers (poll ${w.turnPollSeconds} s, woken by NOTIFY); ` +
      `reminder worker batch ${w.reminderBatch}, poll ${w.reminderPollSeconds} s, armed by a timer at the next due time, ` +
      `firing a batch a few at a time (the reminders' default; startApp sets none)`,
  );
  try {
    return await burst(app, deliveries, fake, run, personaNames, chatOf, w);
  } finally {
    await app.stop();
    await fs.rm(personasDir, { recursive: true, force: true });
  }
}

async function burst(
  app: App,
  deliveries: Delivery[],
  fake: Awaited<ReturnType<typeof startFakeLlm>>,
  run: number,
  personaNames: string[],
  chatOf: (persona: string) => string,
  w: ReturnType<typeof workerSettings>,
) {

  const scope = (name: string) => {
    const persona = app.personas.find((p) => p.name === name)!;
    const chatId = chatOf(name);
    return app.scheduler.forTurn({ persona, conversationId: chatConversationId(name, 'chat', chatId), origin: { connector: 'chat', chat: chatId, chatType: 'dm' } });
  };

  // Warm-up (not counted): one reminder per persona, so connections, prepared statements and JIT are warm.
  const warmDue = new Date(Date.now() + 1000);
  const warmStart = Date.now();
  await Promise.all(personaNames.map((name) => scope(name).remind({ name: `${name}-warm`, prompt: 'warm-up', dueAt: warmDue })));
  // Each persona's burst reminders are scheduled one after another: give that twice the time it should take.
  const leadMs = Math.max(LEAD_MS, 2 * (Date.now() - warmStart) * PER_PERSONA);
  const warmDeadline = Date.now() + 30_000;
  while (deliveries.filter((d) => d.text.endsWith('-warm')).length < PERSONAS && Date.now() < warmDeadline) await sleep(20);
  for (const name of personaNames) await app.waitForIdle(chatConversationId(name, 'chat', chatOf(name)), 30_000);
  const warm = deliveries.filter((d) => d.text.endsWith('-warm')).map((d) => d.at - warmDue.getTime());
  const ws = stats(warm);
  console.log(`  warm-up: ${warm.length}/${PERSONAS} reminders due at once arrived, lateness p50 ${ms(ws.p50).trim()} ms, max ${ms(ws.max).trim()} ms (not counted)`);
  deliveries.length = 0;

  // The burst: reminder k of persona p is due at base + (k·PERSONAS + p)·step, so chats interleave over the second.
  const total = PERSONAS * PER_PERSONA;
  const base = Math.ceil((Date.now() + leadMs) / 1000) * 1000;
  const step = SPREAD_MS / total;
  const planned: { persona: string; name: string; dueAt: Date }[] = [];
  for (let k = 0; k < PER_PERSONA; k++) {
    for (let p = 0; p < PERSONAS; p++) {
      const persona = personaNames[p];
      planned.push({ persona, name: `${persona}-r${k}`, dueAt: new Date(base + Math.floor((k * PERSONAS + p) * step)) });
    }
  }
  const dueOf = new Map(planned.map((r) => [r.name, r.dueAt.getTime()]));
  const firstDue = Math.min(...dueOf.values());
  const lastDue = Math.max(...dueOf.values());

  // Scheduled as turns would: each persona's reminders one after another, the personas side by side.
  const scheduleStart = Date.now();
  const byPersona = new Map<string, typeof planned>();
  for (const r of planned) byPersona.set(r.persona, [...(byPersona.get(r.persona) ?? []), r]);
  await Promise.all(
    [...byPersona].map(async ([persona, list]) => {
      const api = scope(persona);
      for (const r of list) await api.remind({ name: r.name, prompt: `Reminder ${r.name}`, dueAt: r.dueAt });
    }),
  );
  const scheduledAt = Date.now();
  console.log(
    `  scheduled ${total} reminders (${PERSONAS} personas × ${PER_PERSONA}, due over ${lastDue - firstDue + 1} ms) in ${scheduledAt - scheduleStart} ms; ` +
      (scheduledAt < firstDue ? `${firstDue - scheduledAt} ms before the first was due` : `⚠ ${scheduledAt - firstDue} ms AFTER the first was due: raise BENCH_LEAD_MS`),
  );

  // Wait for every name once (or give up), then linger to catch duplicates.
  const expected = new Set(dueOf.keys());
  const seen = new Set<string>();
  const giveUp = lastDue + GIVE_UP_MS;
  // How busy this process (Parlor and the fake model) and the machine were from the first due time to all arrived.
  await sleep(firstDue - Date.now());
  const loopDelay = monitorEventLoopDelay({ resolution: 10 });
  loopDelay.enable();
  const cpu0 = process.cpuUsage();
  const machine0 = await machineCpu();
  let read = 0;
  while (seen.size < total && Date.now() < giveUp) {
    const upTo = deliveries.length;
    for (let i = read; i < upTo; i++) if (expected.has(deliveries[i].text)) seen.add(deliveries[i].text);
    read = upTo;
    if (seen.size < total) await sleep(20);
  }
  const allByMs = Date.now();
  const cpu = process.cpuUsage(cpu0);
  const machine1 = await machineCpu();
  loopDelay.disable();
  const nodeCpu = (cpu.user + cpu.system) / 1000 / Math.max(1, allByMs - firstDue);
  const machineBusy = machine0 && machine1 ? (machine1.busy - machine0.busy) / Math.max(1, machine1.total - machine0.total) : undefined;
  await sleep(LINGER_MS);

  // Per reminder: the first delivery is its time; more are duplicates.
  const count = new Map<string, number>();
  const firstAt = new Map<string, number>();
  const others: Delivery[] = [];
  for (const d of deliveries) {
    if (!expected.has(d.text)) {
      others.push(d);
      continue;
    }
    count.set(d.text, (count.get(d.text) ?? 0) + 1);
    if (!firstAt.has(d.text)) firstAt.set(d.text, d.at);
  }
  const missing = [...expected].filter((n) => !count.has(n));
  const duplicates = [...count].filter(([, n]) => n > 1);
  const wrongChat = deliveries.filter((d) => expected.has(d.text) && !d.text.startsWith(`${d.chat.replace(/-chat$/, '')}-`));
  const lateness = [...firstAt].map(([name, at]) => at - dueOf.get(name)!);
  const s = stats(lateness);

  console.log(
    `  arrived ${firstAt.size}/${total}; exactly once: ${missing.length === 0 && duplicates.length === 0 ? 'yes' : 'NO'}` +
      (missing.length ? `; missing ${missing.length}: ${missing.slice(0, 20).join(', ')}${missing.length > 20 ? ', …' : ''}` : '') +
      (duplicates.length ? `; duplicated ${duplicates.length}: ${duplicates.slice(0, 20).map(([n, c]) => `${n}×${c}`).join(', ')}` : ''),
  );
  if (wrongChat.length) console.log(`  ⚠ ${wrongChat.length} delivered to the wrong chat, e.g. ${wrongChat[0].text} → ${wrongChat[0].chat}`);
  if (others.length) console.log(`  ⚠ ${others.length} other messages sent, e.g. ${others.slice(0, 3).map((d) => `${d.chat}: ${JSON.stringify(d.text.slice(0, 120))}`).join('; ')}`);
  console.log(`  lateness (delivered − due)          p50 ${ms(s.p50)} ms  p95 ${ms(s.p95)} ms  p99 ${ms(s.p99)} ms  max ${ms(s.max)} ms  (min ${s.min.toFixed(0)} ms)`);
  const lastDelivered = Math.max(...firstAt.values());
  if (firstAt.size) console.log(
    `  first delivered ${ms(Math.min(...firstAt.values()) - firstDue).trim()} ms after the first due time, last ${ms(lastDelivered - firstDue).trim()} ms after it ` +
      `(${ms(lastDelivered - lastDue).trim()} ms after the last due time)` +
      (firstAt.size < total ? `; stopped waiting ${allByMs - lastDue} ms after the last due time` : ''),
  );
  console.log(`  aim p99 < ${AIM_P99_MS} ms: ${s.p99 < AIM_P99_MS ? 'met' : `NOT met (p99 ${s.p99.toFixed(0)} ms)`}`);

  // Where the time goes, from the database: the reminder job (fetched), the turn job (created, fetched), the send.
  const ids = (await app.database.db.execute(
    sql`select id::text, name, fires, status, due_at from reminders where persona like ${`r${run}-p%`} and name not like '%-warm'`,
  )) as unknown as { id: string; name: string; fires: number; status: string }[];
  const reminderJobIds = ids.map((r) => stableUuid(`reminder:${r.id}:0`));
  const turnJobIds = ids.map((r) => stableUuid(`reminder-turn:${r.id}:0`));
  const jobs = (await app.database.db.execute(
    sql`select id::text, name, singleton_key, created_on, started_on, completed_on, state, retry_count from pgboss.job
        where id = any(${sql.raw(`array[${[...reminderJobIds, ...turnJobIds].map((id) => `'${id}'`).join(',')}]::uuid[]`)})`,
  )) as unknown as { id: string; name: string; singleton_key: string | null; created_on: string; started_on: string | null; completed_on: string | null; state: string; retry_count: number }[];
  const job = new Map(jobs.map((j) => [j.id, j]));
  const t = (v: string | null | undefined) => (v ? new Date(v).getTime() : NaN);
  const phases = { pickup: [] as number[], fire: [] as number[], queue: [] as number[], run: [] as number[] };
  let retried = 0;
  const notDone = ids.filter((r) => r.status !== 'done' || r.fires !== 1);
  for (const r of ids) {
    const rj = job.get(stableUuid(`reminder:${r.id}:0`));
    const tj = job.get(stableUuid(`reminder-turn:${r.id}:0`));
    const due = dueOf.get(r.name)!;
    const delivered = firstAt.get(r.name);
    if ((rj?.retry_count ?? 0) > 0 || (tj?.retry_count ?? 0) > 0) retried++;
    if (rj) phases.pickup.push(t(rj.started_on) - due);
    if (rj && tj) phases.fire.push(t(tj.created_on) - t(rj.started_on));
    if (tj) phases.queue.push(t(tj.started_on) - t(tj.created_on));
    if (tj && delivered !== undefined) phases.run.push(delivered - t(tj.started_on));
  }
  console.log(`  where the time goes (per reminder; Postgres and Node clocks)     p50      p95      max`);
  const line = (label: string, xs: number[]) => {
    const x = stats(xs.filter(Number.isFinite));
    console.log(`    ${label.padEnd(60)} ${ms(x.p50)} ms ${ms(x.p95)} ms ${ms(x.max)} ms`);
  };
  line('due → firing job fetched by the reminder worker', phases.pickup);
  line('fetched → its turn job written (batch wait + firing tx)', phases.fire);
  line('turn job written → fetched by a turn worker (turn queue)', phases.queue);
  // A turn job waits for its chat's previous turn (one turn at a time per conversation), then for a free worker.
  const forKey: number[] = [];
  const forWorker: number[] = [];
  const byChat = new Map<string, { created: number; started: number; completed: number }[]>();
  for (const id of turnJobIds) {
    const j = job.get(id);
    if (!j?.singleton_key) continue;
    byChat.set(j.singleton_key, [...(byChat.get(j.singleton_key) ?? []), { created: t(j.created_on), started: t(j.started_on), completed: t(j.completed_on) }]);
  }
  for (const list of byChat.values()) {
    list.sort((a, b) => a.started - b.started);
    list.forEach((j, i) => {
      const keyFree = i > 0 ? list[i - 1].completed : -Infinity;
      const waitKey = Math.max(0, Math.min(keyFree, j.started) - j.created);
      forKey.push(waitKey);
      forWorker.push(j.started - j.created - waitKey);
    });
  }
  line("  of which waiting for the chat's previous turn to finish", forKey);
  line('  of which waiting for a free turn worker (or its poll)', forWorker);
  line('turn fetched → connector send (model, tools, delivery)', phases.run);
  // Firing throughput, and how busy the turn workers were while turns were waiting.
  const reminderJobs = reminderJobIds.map((id) => job.get(id)).filter((j) => j !== undefined);
  const turnJobs = turnJobIds.map((id) => job.get(id)).filter((j) => j !== undefined);
  const firedFrom = Math.min(...reminderJobs.map((j) => t(j.started_on)));
  const firedTo = Math.max(...turnJobs.map((j) => t(j.created_on)));
  const turnFrom = Math.min(...turnJobs.map((j) => t(j.started_on)));
  const turnTo = Math.max(...turnJobs.map((j) => t(j.completed_on)));
  const busy = turnJobs.reduce((sum, j) => sum + (t(j.completed_on) - t(j.started_on)), 0);
  const turnMs = stats(turnJobs.map((j) => t(j.completed_on) - t(j.started_on)));
  console.log(
    `  firing: ${reminderJobs.length} firings from ${firedFrom - firstDue} ms to ${firedTo - firstDue} ms after the first due time ` +
      `(${((turnJobs.length / (firedTo - firedFrom)) * 1000).toFixed(0)}/s)`,
  );
  console.log(
    `  turns: ${turnJobs.length} from ${turnFrom - firstDue} ms to ${turnTo - firstDue} ms (${((turnJobs.length / (turnTo - turnFrom)) * 1000).toFixed(0)}/s); ` +
      `a turn job took p50 ${ms(turnMs.p50).trim()} ms, max ${ms(turnMs.max).trim()} ms; on average ${(busy / (turnTo - turnFrom)).toFixed(1)} of ${w.turnWorkers} turn workers busy`,
  );
  console.log(
    `  from the first due time to all arrived: this process (Parlor + fake model) used ${(nodeCpu * 100).toFixed(0)}% of one core, ` +
      `event-loop delay p99 ${(loopDelay.percentile(99) / 1e6).toFixed(0)} ms, max ${(loopDelay.max / 1e6).toFixed(0)} ms` +
      (machineBusy !== undefined ? `; the machine's ${os.cpus().length} cores were ${(machineBusy * 100).toFixed(0)}% busy (Postgres included)` : ''),
  );
  if (retried) console.log(`  ⚠ ${retried} reminder or turn jobs were retried`);
  if (notDone.length) console.log(`  ⚠ ${notDone.length} reminders are not done with one firing, e.g. ${JSON.stringify(notDone[0])}`);
  const [turns] = (await app.database.db.execute(
    sql`select count(*)::int as n, count(distinct job_id)::int as jobs, count(*) filter (where status <> 'ok')::int as not_ok
        from turns where conversation_id like ${`r${run}-p%`} and kind = 'wake'`,
  )) as unknown as { n: number; jobs: number; not_ok: number }[];
  // A reminder that fell due while a wake turn of its chat was still waiting joined it, and has no turn job of its own.
  const joined = ids.length - turnJobs.length;
  if (joined) console.log(`  ${joined} of ${ids.length} reminders joined a turn of their chat that was still waiting: ${turnJobs.length} turns`);
  const expectedTurns = turnJobs.length + PERSONAS; // with the warm-up
  if (turns.n !== expectedTurns || turns.jobs !== turns.n || turns.not_ok) {
    console.log(`  ⚠ wake turns in the database: ${turns.n} for ${turns.jobs} jobs (expected ${expectedTurns}), ${turns.not_ok} not ok`);
  }
  const requests = fake.requests.length;
  if (requests !== expectedTurns) console.log(`  ⚠ model calls: ${requests} (expected ${expectedTurns}, one per turn)`);
  return { workers: w.turnWorkers, ...s, arrived: firstAt.size, missing: missing.length, duplicates: duplicates.length };
}

async function main() {
  // startApp runs the built-in tools; the fired turns need reply_to_origin among them.
  if (!createBuiltinTools({ timezone: 'UTC' }).some((t) => t.name === 'reply_to_origin' && (!t.contexts || t.contexts.includes('wake')))) {
    throw new Error('reply_to_origin is not a built-in tool offered in wake turns; this benchmark needs it');
  }
  const database = await createBenchDatabase();
  const fake = await startFakeLlm();
  console.log(
    `Parlor reminder burst: ${PERSONAS * PER_PERSONA} reminders (${PERSONAS} personas, one chat each, ${PER_PERSONA} a chat) due within ${SPREAD_MS} ms; ` +
      `fake LLM answering at once with reply_to_origin + end_task (${os.cpus().length} cores, Node ${process.version})`,
  );
  const results = [];
  try {
    for (const [i, concurrency] of CONCURRENCIES.entries()) results.push({ concurrency, ...(await runOnce(database.parlorUrl, fake, i + 1, concurrency)) });
  } finally {
    await fake.close();
    await database.drop();
  }
  console.log('\nsummary (lateness, delivered − due)');
  for (const r of results) {
    console.log(
      `  concurrency ${String(r.concurrency ?? 'default').padEnd(7)} (${String(r.workers).padStart(2)} turn workers)  ` +
        `p50 ${ms(r.p50)} ms  p95 ${ms(r.p95)} ms  p99 ${ms(r.p99)} ms  max ${ms(r.max)} ms  ` +
        `arrived ${r.arrived}, missing ${r.missing}, duplicated ${r.duplicates}  p99 < ${AIM_P99_MS} ms: ${r.p99 < AIM_P99_MS ? 'met' : 'NOT met'}`,
    );
  }
}

await main();
process.exit(0);
