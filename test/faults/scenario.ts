// One fault run: people on Telegram, Discord and Slack keep writing, asking for a tool that needs approval (and
// clicking, or not) and setting reminders, while Parlor processes are killed with SIGKILL or stopped (SIGSTOP) until
// the others fence them, Postgres restarts, the
// model fails in every way it can and the platforms rate-limit, fail, drop connections and deliver twice. At the end
// the invariants are checked from the fakes' records and the database.
import fs from 'node:fs/promises';
import path from 'node:path';
import type { FakeReply, RecordedRequest } from '../support/fake-llm.ts';
import type { BotApiReply } from '../support/fake-telegram.ts';
import { discordPlatform, GROUP, slackPlatform, telegramPlatform, type BotMessage, type Platform, type PlatformName } from './platforms.ts';
import { HUNG_AFTER_SECONDS, startWorld, type World } from './world.ts';

export interface FaultConfig {
  /** Kill -9 cycles (each: some seconds of load, then a kill of a random process, or a Postgres restart). */
  cycles: number;
  /** Which cycles restart Postgres instead of killing a process. */
  postgresEvery: number;
  /**
   * Which cycles (the middle one of every so many) stop a process with SIGSTOP (a worker, then the one that runs the
   * connectors, in turn) for longer than the others take to fence it, instead of killing a process; then let it run
   * again (it must exit, and is started again).
   */
  stopEvery: number;
  /** Seconds of load between faults (a random time in this range). */
  cycleSeconds: [number, number];
  workers: number;
  seed: number;
  /** Chats per platform and flow. */
  chats: { echo: number; ask: number; remind: number };
  /** Share of model calls that fail. */
  modelFaultRate: number;
  approvalTimeoutSeconds: number;
  /** How long the end of the run waits for everything in flight to finish. */
  drainSeconds: number;
  log?: (line: string) => void;
}

export interface FaultReport {
  seconds: number;
  sent: Record<PlatformName, number>;
  /** Of those, posts in a group that mention the bot. */
  mentions: Record<PlatformName, number>;
  accepted: number;
  /** Messages the platform's connection never took (Discord: posted while no session read them, and never read back). */
  notAccepted: Record<PlatformName, number>;
  clicks: number;
  reminders: number;
  kills: number;
  /** Processes stopped (SIGSTOP) past the hung period, and of those, how many exited fenced (status 1) when resumed. */
  stops: number;
  fencedExits: number;
  /** A stopped process that, resumed, exited some other way than fenced. */
  badStopExits: string[];
  postgresRestarts: number;
  crashes: number;
  faults: Record<string, number>;
  lost: string[];
  duplicated: string[];
  /**
   * Telegram messages sent twice because a process was killed after Telegram had the message and before its sent
   * mark: the row was taken over (`resends`) and sent again. Telegram takes no idempotency key and cannot be asked
   * what a chat holds, so there it is at least once; Discord (nonce) and Slack (metadata) are asked and stay once.
   */
  resentAfterKill: string[];
  outOfOrder: string[];
  stuck: string[];
  failedVisibly: number;
  unapprovedRuns: string[];
  toolRanTwice: string[];
  approvals: { allowed: number; denied: number; expired: number };
  remindersFired: number;
  internalText: string[];
  unexpected: string[];
  recoveryMs: { p50: number; p99: number; count: number };
  rss: { peakBytes: number; firstBytes: number; lastBytes: number };
  tables: { firstBytes: number; lastBytes: number };
  leftOver: Record<string, number>;
  crashTails: string[];
  diagnosis: string[];
}

/** Seeded, so a failing run can be run again as it was. */
function random(seed: number) {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** What a chat must never show: stack traces, tool-call wire text, the system prompt, placeholders. */
const INTERNAL = [
  /\n\s+at .+:\d+:\d+/,
  /\bat (?:async )?[\w.<>]+ \(.*:\d+:\d+\)/,
  /\[object Object\]/,
  /\bundefined\b/,
  /"tool_calls"|"function":\s*\{|<\/?tool_call>/,
  /under fault injection/,
  /ECONNREFUSED|ECONNRESET|socket hang up/,
  /\bpg-boss\b|\bpostgres(?:ql)?:\/\//i,
  /TypeError|ReferenceError|SyntaxError/,
];

/** The reminders (`fire <name>`) this transcript has answered with a reply_to_origin that was not cut off. */
function answeredReminders(messages: { role: string; content: unknown; tool_calls?: { id: string; function: { name: string; arguments: string } }[]; tool_call_id?: string }[]): Set<string> {
  const results = new Map(messages.filter((m) => m.role === 'tool').map((m) => [m.tool_call_id, String(m.content)]));
  const answered = new Set<string>();
  for (const m of messages) {
    for (const call of m.tool_calls ?? []) {
      if (call.function.name !== 'reply_to_origin') continue;
      const result = results.get(call.id);
      if (result === undefined || result.startsWith('interrupted')) continue;
      const text = (JSON.parse(call.function.arguments) as { text?: string }).text ?? '';
      for (const line of text.split('\n')) {
        const name = /^reminder (\S+)$/.exec(line)?.[1];
        if (name) answered.add(name);
      }
    }
  }
  return answered;
}

function percentile(sorted: number[], p: number): number {
  if (!sorted.length) return 0;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

export async function runFaults(config: FaultConfig): Promise<FaultReport> {
  const rand = random(config.seed);
  const chance = (p: number) => rand() < p;
  const between = (a: number, b: number) => a + rand() * (b - a);
  const log = config.log ?? (() => {});
  const faults: Record<string, number> = {};
  const count = (kind: string) => void (faults[kind] = (faults[kind] ?? 0) + 1);

  // Platform trouble comes in windows of a few seconds.
  const windows = { telegram429: 0, telegram5xx: 0, telegramDrop: 0 };
  const telegramChaos = (method: string): BotApiReply | 'drop' | undefined => {
    const now = Date.now();
    const sending = method !== 'getUpdates';
    if (now < windows.telegram429 && sending && chance(0.6)) {
      count('telegram 429');
      return { ok: false, error_code: 429, description: 'Too Many Requests: retry after 1', parameters: { retry_after: 1 } };
    }
    if (now < windows.telegram5xx && chance(0.5)) {
      count('telegram 5xx');
      return { ok: false, error_code: 502, description: 'Bad Gateway' };
    }
    if (now < windows.telegramDrop && chance(0.4)) {
      count('telegram dropped connection');
      return 'drop';
    }
    return undefined;
  };

  const names = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => `${prefix}${i}`);
  const tgIds = (base: number, n: number) => Array.from({ length: n }, (_, i) => String(base + i));
  const people: Record<PlatformName, { echo: string[]; ask: string[]; remind: string[] }> = {
    telegram: { echo: tgIds(3000, config.chats.echo), ask: tgIds(4000, config.chats.ask), remind: tgIds(5000, config.chats.remind) },
    discord: { echo: names('decho', config.chats.echo), ask: names('dask', config.chats.ask), remind: names('drem', config.chats.remind) },
    slack: { echo: names('USECHO', config.chats.echo), ask: names('USASK', config.chats.ask), remind: names('USREM', config.chats.remind) },
  };
  const all = (p: PlatformName) => [...people[p].echo, ...people[p].ask, ...people[p].remind];
  const world: World = await startWorld({
    telegramUsers: all('telegram').map(Number),
    discordUsers: all('discord'),
    slackUsers: all('slack'),
    workers: config.workers,
    approvalTimeoutSeconds: config.approvalTimeoutSeconds,
    telegramChaos,
  });
  const started = Date.now();
  const platforms: Record<PlatformName, Platform> = {
    telegram: telegramPlatform(world.telegram),
    discord: discordPlatform(world.discord),
    slack: slackPlatform(world.slack),
  };

  // The model: echoes every message since its last answer, calls `mark` for `ask:` and `remind` for `remind:`, and
  // answers a reminder with reply_to_origin. Some calls fail.
  const modelFault = (): FakeReply | undefined => {
    if (!chance(config.modelFaultRate)) return undefined;
    const r = rand();
    if (r < 0.25) return count('model 429'), { status: 429, headers: { 'retry-after': '1' }, text: 'rate limited' };
    if (r < 0.45) return count('model 500'), { status: 500, text: 'internal error' };
    if (r < 0.55) return count('model 503'), { status: 503, text: 'overloaded' };
    if (r < 0.7) return count('model dropped connection'), { destroy: true };
    if (r < 0.78) return count('model malformed stream'), { malformed: true };
    if (r < 0.85) return count('model stream cut off'), { cut: true };
    return count('model stalled stream'), { stall: true };
  };
  world.setModel((req: RecordedRequest): FakeReply => {
    const fault = modelFault();
    if (fault) return fault;
    const messages: { role: string; content: unknown }[] = req.body.messages ?? [];
    const last = messages[messages.length - 1];
    const text = req.lastUserText;
    // Reminders of one chat that fall due together arrive in one turn: each is answered, once.
    const fires = [...text.matchAll(/fire (\S+)/g)].map((m) => m[1]);
    if (text.startsWith('[reminder') && fires.length) {
      const answered = answeredReminders(messages);
      const open = fires.filter((fire) => !answered.has(fire));
      if (open.length === 0) return { toolCalls: [{ name: 'end_task', arguments: { status: 'ok' } }] };
      // One message a turn: a line for each.
      return { toolCalls: [{ name: 'reply_to_origin', arguments: { text: open.map((fire) => `reminder ${fire}`).join('\n') } }] };
    }
    const ask = /ask:(\S+)/.exec(text)?.[1];
    if (ask) {
      if (last.role === 'tool') return { text: `done ${ask}: ${String(last.content).split('\n')[0].slice(0, 80)}` };
      return { toolCalls: [{ name: 'mark', arguments: { id: ask } }] };
    }
    const remind = /remind:(\S+)/.exec(text)?.[1];
    if (remind) {
      // A call cut off by a kill is made again (a reminder it did set refuses the same name, and says so).
      if (last.role === 'tool' && !String(last.content).startsWith('interrupted')) return { text: `set ${remind}` };
      return { toolCalls: [{ name: 'remind', arguments: { action: 'remind', name: remind, prompt: `fire ${remind}`, in_seconds: 3 + Math.floor(rand() * 6) } }] };
    }
    // Every user message since the last answer.
    const since = messages.slice(messages.findLastIndex((m) => m.role === 'assistant') + 1).filter((m) => m.role === 'user');
    const tokens = since.flatMap((m) => [...JSON.stringify(m.content).matchAll(/\bm:([\w-]+)/g)].map((x) => x[1]));
    return { text: `echo: ${tokens.length ? tokens.join(' ') : 'nothing'}` };
  });

  // What was sent, per platform and person, and its outcome as the platform saw it.
  interface Sent { platform: PlatformName; person: string; token: string; kind: 'echo' | 'ask' | 'remind'; at: number; ref: string; accepted: boolean | 'unknown' }
  const sent: Sent[] = [];
  const clicked = new Map<string, 'Allow once' | 'Deny' | 'none'>();
  let clicks = 0;
  let running = true;
  let sequence = 0;

  const post = async (platform: Platform, person: string, kind: Sent['kind'], inGroup = false) => {
    const token = `${platform.name[0]}${++sequence}`;
    const text = kind === 'echo' ? `m:${token}` : kind === 'ask' ? `ask:${token}` : `remind:${token}`;
    const at = Date.now();
    const result = await (inGroup && platform.mention ? platform.mention(person, text) : platform.dm(person, text)).catch(() => ({ ref: '', accepted: false as const }));
    sent.push({ platform: platform.name, person: inGroup ? GROUP : person, token, kind, at, ref: result.ref, accepted: result.accepted });
    // A post the platform did not take (no connection to hand it to) has no answer to wait for.
    return { token, taken: result.accepted !== false };
  };
  // Once the load stops, a person waits a little longer for an answer, not the whole timeout: a post lost in a
  // kill's gap (taken by a connection that died with its process) has none coming, and the drain below waits for
  // whatever is still in flight.
  let stoppedAt = 0;
  const waitFor = async <T>(check: () => T | undefined, timeoutMs: number): Promise<T | undefined> => {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline && (running || Date.now() - stoppedAt < 20_000)) {
      const value = check();
      if (value) return value;
      await sleep(200);
    }
    return undefined;
  };

  const loops: Promise<void>[] = [];
  for (const platform of Object.values(platforms)) {
    const { echo, ask, remind } = people[platform.name];
    for (const person of echo) {
      loops.push(
        (async () => {
          while (running) {
            // Now and then in the persona's group, mentioning it, instead of the DM: well under Telegram's 20
            // messages a minute per group, which Parlor keeps to (more would only queue up behind it).
            await post(platform, person, 'echo', platform.mention !== undefined && chance(0.04));
            await sleep(between(500, 3000));
          }
        })(),
      );
    }
    for (const person of remind) {
      loops.push(
        (async () => {
          while (running) {
            // One at a time: the model sets one reminder per message it answers.
            const { token, taken } = await post(platform, person, 'remind');
            if (taken) await waitFor(() => platform.messages(person).some((m) => m.text === `set ${token}`), 90_000);
            await sleep(between(1000, 4000));
          }
        })(),
      );
    }
    for (const person of ask) {
      loops.push(
        (async () => {
          while (running) {
            const { token, taken } = await post(platform, person, 'ask');
            if (!taken) {
              await sleep(between(500, 1500));
              continue;
            }
            // The approval prompt: the newest message with buttons that names the token.
            const prompt = await waitFor(() => platform.messages(person).findLast((m: BotMessage) => m.buttons.length > 0 && m.text.includes(token)), 90_000);
            if (prompt) {
              await sleep(between(0, 2000));
              const r = rand();
              const choice = r < 0.6 ? 'Allow once' : r < 0.85 ? 'Deny' : 'none';
              clicked.set(token, choice);
              if (choice !== 'none') {
                clicks++;
                await platform.click(person, prompt, choice).catch(() => {});
              }
            }
            await waitFor(() => platform.messages(person).some((m) => m.text.startsWith(`done ${token}:`)), (config.approvalTimeoutSeconds + 90) * 1000);
            await sleep(between(200, 1500));
          }
        })(),
      );
    }
  }

  // Samples: memory of each process, the database's size.
  const rssSamples: number[] = [];
  const tableSamples: number[] = [];
  const sampler = (async () => {
    while (running) {
      const rss = await world.rss();
      for (const r of rss) rssSamples.push(r.bytes);
      const [row] = await world.sql<{ bytes: string }[]>`select coalesce(sum(pg_total_relation_size(c.oid)), 0)::text as bytes
        from pg_class c join pg_namespace n on n.oid = c.relnamespace where c.relkind = 'r' and n.nspname in ('public', 'pgboss')`.catch(() => [{ bytes: '0' }]);
      if (Number(row.bytes)) tableSamples.push(Number(row.bytes));
      await sleep(2000);
    }
  })();

  // The faults.
  let kills = 0;
  let postgresRestarts = 0;
  let stops = 0;
  let fencedExits = 0;
  const badStopExits: string[] = [];
  for (let cycle = 1; cycle <= config.cycles; cycle++) {
    await sleep(between(config.cycleSeconds[0], config.cycleSeconds[1]) * 1000);
    // Platform trouble, one or two kinds per cycle.
    for (let i = 0; i < 1 + Math.floor(rand() * 2); i++) {
      const now = Date.now();
      const r = rand();
      if (r < 0.12) windows.telegram429 = now + 3000;
      else if (r < 0.22) windows.telegram5xx = now + 2000;
      else if (r < 0.3) windows.telegramDrop = now + 2000;
      else if (r < 0.42) {
        count('discord 429');
        world.discord.failNext('POST /channels/:id/messages', { status: 429, retryAfter: 1 }, 3);
      } else if (r < 0.5) {
        count('discord 5xx');
        world.discord.failNext('POST /channels/:id/messages', { status: 502 }, 2);
      } else if (r < 0.55) {
        count('discord 5xx after creating');
        world.discord.failNext('POST /channels/:id/messages', { status: 500, applied: true }, 1);
      } else if (r < 0.62) {
        if (platforms.discord.disconnect()) count('discord gateway dropped');
      } else if (r < 0.7) {
        count('slack 429');
        world.slack.failNext('chat.postMessage', { retryAfter: 1, times: 3 });
      } else if (r < 0.74) {
        count('slack 5xx');
        world.slack.failNext('chat.postMessage', { status: 503, times: 2 });
      } else if (r < 0.77) {
        count('slack 5xx after posting');
        world.slack.failNext('chat.postMessage', { status: 500, afterDoing: true });
      } else if (r < 0.82) {
        if (platforms.slack.disconnect()) count('slack socket dropped');
      } else {
        const platform = Object.values(platforms)[Math.floor(rand() * 3)];
        const taken = async (ref: string) =>
          ref !== '' &&
          (await world.sql`select 1 from inbound_events where connector = ${platform.name} and strpos(external_id, ${ref}) > 0 limit 1`.catch(() => [])).length > 0;
        if (await platform.duplicate((n) => Math.floor(rand() * n), taken)) count(`${platform.name} duplicate delivery`);
      }
    }
    if (cycle % config.postgresEvery === 0) {
      const mode = postgresRestarts % 2 === 0 ? 'immediate' : 'fast';
      if (await world.restartPostgres(mode)) {
        postgresRestarts++;
        log(`cycle ${cycle}: Postgres restarted (${mode})`);
        continue;
      }
    }
    if (cycle % config.stopEvery === Math.ceil(config.stopEvery / 2) && world.processes.length > 1) {
      // A worker, then the process that runs the connectors (which a worker fences), in turn.
      const victim = stops % 2 === 1 ? world.processes[0] : world.processes[1 + Math.floor(rand() * (world.processes.length - 1))];
      // Past the hung period, a sweep of the others (every 5 s) and their own heartbeats' slack.
      const exit = await world.stopAndResume(victim, HUNG_AFTER_SECONDS * 1000 + 10_000);
      stops++;
      if (exit === 1) fencedExits++;
      else if (exit !== 'ran on') badStopExits.push(`${victim.name} exited (${exit}) when it ran again after being stopped`);
      log(`cycle ${cycle}: stopped ${victim.name} for ${HUNG_AFTER_SECONDS + 10} s; ${exit === 'ran on' ? 'it ran on' : `it exited (${exit}) and runs again`}`);
      continue;
    }
    // The process that runs the connectors more often than a worker.
    const victim = chance(0.6) || world.processes.length === 1 ? world.processes[0] : world.processes[1 + Math.floor(rand() * (world.processes.length - 1))];
    const at = Date.now();
    await world.killAndRestart(victim);
    kills++;
    log(`cycle ${cycle}: killed ${victim.name}, running again after ${Date.now() - at} ms`);
  }

  // The end: no new messages; what is in flight finishes.
  running = false;
  stoppedAt = Date.now();
  log('load stopping: each person finishes what they are doing');
  await Promise.all([...loops, sampler]);
  log('load stopped; waiting for what is in flight');
  const drainDeadline = Date.now() + config.drainSeconds * 1000;
  const pending = async () => {
    const [row] = await world.sql<{ turns: number; outbox: number; questions: number; reminders: number; jobs: number }[]>`select
      (select count(*)::int from turns where status = 'running') as turns,
      (select count(*)::int from outbound_messages where status in ('pending', 'sending')) as outbox,
      (select count(*)::int from questions where status = 'pending') as questions,
      (select count(*)::int from reminders where status = 'pending') as reminders,
      (select count(*)::int from pgboss.job where state in ('created', 'retry', 'active') and name in ('turn', 'reminder')
        and start_after <= now()) as jobs`;
    return row;
  };
  let left = await pending().catch(() => undefined);
  while (Date.now() < drainDeadline) {
    left = await pending().catch(() => undefined);
    if (left && left.turns + left.outbox + left.questions + left.reminders + left.jobs === 0) break;
    await sleep(1000);
  }
  log(`drained: ${JSON.stringify(left)}`);
  // A last moment for a duplicate to show, if one were coming.
  await sleep(3000);

  // The checks.
  const report: FaultReport = {
    seconds: 0,
    sent: { telegram: 0, discord: 0, slack: 0 },
    mentions: { telegram: 0, discord: 0, slack: 0 },
    accepted: 0,
    notAccepted: { telegram: 0, discord: 0, slack: 0 },
    clicks,
    reminders: 0,
    kills,
    stops,
    fencedExits,
    badStopExits,
    postgresRestarts,
    crashes: world.crashes.length,
    faults,
    lost: [],
    duplicated: [],
    resentAfterKill: [],
    outOfOrder: [],
    stuck: [],
    failedVisibly: 0,
    unapprovedRuns: [],
    toolRanTwice: [],
    approvals: { allowed: 0, denied: 0, expired: 0 },
    remindersFired: 0,
    internalText: [],
    unexpected: [],
    recoveryMs: { p50: 0, p99: 0, count: 0 },
    rss: { peakBytes: Math.max(0, ...rssSamples), firstBytes: rssSamples[0] ?? 0, lastBytes: rssSamples[rssSamples.length - 1] ?? 0 },
    tables: { firstBytes: tableSamples[0] ?? 0, lastBytes: tableSamples[tableSamples.length - 1] ?? 0 },
    leftOver: left ? { ...left } : {},
    diagnosis: [],
    crashTails: world.crashes.map((c) => `${c.name} exited (${c.code ?? c.signal}) at +${Math.round((c.at - started) / 1000)} s:\n  ${c.tail.join('\n  ')}`),
  };
  const inbound = new Set(
    (await world.sql<{ connector: string; external_id: string }[]>`select connector, external_id from inbound_events`).map((r) => `${r.connector}:${r.external_id}`),
  );
  const marks = (await fs.readFile(path.join(world.personaDir, 'workspace', 'marks.txt'), 'utf8').catch(() => '')).split('\n').filter(Boolean);
  const failureNotice = /^Sorry\b|couldn't reach the model|went wrong|try again/i;

  const allMessages: { platform: PlatformName; person: string; message: BotMessage }[] = [];
  for (const platform of Object.values(platforms)) {
    for (const person of [...all(platform.name), ...(platform.mention ? [GROUP] : [])]) {
      for (const message of platform.messages(person)) allMessages.push({ platform: platform.name, person, message });
    }
  }
  const known = (text: string) =>
    /^echo: /.test(text) || /^done \w+: /.test(text) || /^set \w+$/.test(text) ||
    // Reminders of one chat that fell due together: a line each.
    /^reminder \w+(\nreminder \w+)*$/.test(text) || /\bmark\b/.test(text) ||
    // A click's answer, where the platform shows one as a message (Discord): noted, or too late (the question
    // expired when the process waiting on it was killed).
    /^(Allow once|Always allow|Deny): noted\.$/.test(text) ||
    text === 'This question has expired.';
  for (const { platform, person, message } of allMessages) {
    if (INTERNAL.some((re) => re.test(message.text))) report.internalText.push(`${platform} ${person}: ${message.text.slice(0, 300)}`);
    else if (!known(message.text)) report.unexpected.push(`${platform} ${person}: ${message.text.slice(0, 300)}`);
  }

  const textsOf = (platform: PlatformName, person: string) => allMessages.filter((m) => m.platform === platform && m.person === person).map((m) => m.message);
  for (const s of sent) {
    report.sent[s.platform]++;
    if (s.person === GROUP) report.mentions[s.platform]++;
    const accepted =
      s.platform === 'telegram' ? true : s.platform === 'slack' ? s.accepted === true || [...inbound].some((k) => k.startsWith('slack:') && k.includes(s.ref)) : inboundHas(inbound, s);
    if (!accepted) {
      report.notAccepted[s.platform]++;
      continue;
    }
    report.accepted++;
    const messages = textsOf(s.platform, s.person);
    const label = `${s.platform} ${s.person} ${s.kind}:${s.token}`;
    // Failed visibly: the first thing the chat showed after it was a failure notice (one notice answers one turn).
    const next = messages.filter((m) => m.at >= s.at).sort((a, b) => a.at - b.at)[0];
    const visibleFailure = Boolean(next && failureNotice.test(next.text) && !known(next.text));
    if (s.kind === 'echo') {
      const hits = messages.filter((m) => m.text.startsWith('echo: ') && m.text.split(/\s+/).includes(s.token)).length;
      if (hits === 0) {
        if (visibleFailure) report.failedVisibly++;
        else report.lost.push(label);
      }
      if (hits > 1) report.duplicated.push(`${label} (${hits} replies)`);
    } else if (s.kind === 'ask') {
      const done = messages.filter((m) => m.text.startsWith(`done ${s.token}:`));
      if (done.length === 0) {
        if (visibleFailure) report.failedVisibly++;
        else report.stuck.push(`${label}: no outcome`);
      }
      if (done.length > 1) report.duplicated.push(`${label} (${done.length} outcomes)`);
      const runs = marks.filter((m) => m === s.token).length;
      if (runs > 0 && clicked.get(s.token) !== 'Allow once') report.unapprovedRuns.push(`${label} (clicked: ${clicked.get(s.token) ?? 'nothing'})`);
      if (runs > 1) report.toolRanTwice.push(`${label} (${runs} runs)`);
      const outcome = done[0]?.text ?? '';
      if (/^done \w+: marked/.test(outcome)) report.approvals.allowed++;
      else if (/expir|timed out|no answer/i.test(outcome)) report.approvals.expired++;
      else if (done.length) report.approvals.denied++;
    } else {
      report.reminders++;
      const set = messages.filter((m) => m.text === `set ${s.token}`).length;
      // Reminders of one chat that fell due together are answered in one message, a line each.
      const fired = messages.filter((m) => m.text.split('\n').includes(`reminder ${s.token}`)).length;
      if (set === 0 && fired === 0) {
        if (visibleFailure) report.failedVisibly++;
        else report.lost.push(label);
      }
      if (set > 1) report.duplicated.push(`${label} (${set} confirmations)`);
      if (fired > 1) report.duplicated.push(`${label} (fired ${fired} times)`);
      if (set > 0 && fired === 0) report.stuck.push(`${label}: set, never fired`);
      report.remindersFired += Math.min(fired, 1);
    }
  }
  // Per chat, echo replies come in the order the messages were sent.
  for (const platform of Object.values(platforms)) {
    for (const person of [...people[platform.name].echo, ...(platform.mention && !platform.threadPerMention ? [GROUP] : [])]) {
      const order = sent.filter((s) => s.platform === platform.name && s.person === person).map((s) => s.token);
      const replied = textsOf(platform.name, person)
        .filter((m) => m.text.startsWith('echo: '))
        .flatMap((m) => m.text.slice(6).split(' '))
        .map((t) => order.indexOf(t))
        .filter((i) => i >= 0);
      for (let i = 1; i < replied.length; i++) {
        if (replied[i] >= replied[i - 1]) continue;
        const [early, late] = [order[replied[i - 1]], order[replied[i]]];
        const rows = await world.sql`select id, status, attempts, created_at, sent_at, turn_id, error, text from outbound_messages
          where text ~ ${`\\m(${early}|${late})\\M`} order by id`;
        report.outOfOrder.push(`${platform.name} ${person}: ${early} before ${late}; outbox ${JSON.stringify(rows)}`);
      }
    }
  }
  for (const [k, v] of Object.entries(report.leftOver)) if (v > 0) report.stuck.push(`${v} ${k} left at the end`);
  // A Telegram duplicate that is one outbox row, taken over from a sender killed mid-send: counted on its own.
  for (const label of [...report.duplicated]) {
    const token = /:(\w+)/.exec(label.split(' ')[2] ?? '')?.[1];
    if (!label.startsWith('telegram ') || !token) continue;
    // The text that came twice: an echo, a reminder's confirmation or its firing, or an approval's outcome.
    const pattern = / replies\)$/.test(label) ? `^echo: .*\\m${token}\\M` : / confirmations\)$/.test(label) ? `^set ${token}$` : /\(fired /.test(label) ? `(^|\n)reminder ${token}(\n|$)` : `^done ${token}:`;
    const rows = await world.sql<{ resends: number }[]>`select resends from outbound_messages
      where connector = 'telegram' and text ~ ${pattern} and status = 'sent' and kind = 'message'`;
    if (rows.length === 1 && rows[0].resends > 0) {
      report.duplicated.splice(report.duplicated.indexOf(label), 1);
      report.resentAfterKill.push(label);
    }
  }
  // What holds the outbox: the oldest open row of each chat that has one, and whether its sender is alive.
  const holders = await world.sql`select distinct on (connector, chat) id, connector, chat, status, attempts, created_at, claimed_at, claimed_by,
      claimed_by in (select application_name from pg_stat_activity where application_name is not null) as claimer_alive
    from outbound_messages where status in ('pending', 'sending') order by connector, chat, id`;
  for (const row of holders) report.diagnosis.push(`open at the end: ${JSON.stringify(row)}`);
  // Recovery: from each restart of the process with the connectors to the next reply any platform accepted.
  const replyTimes = allMessages.map((m) => m.message.at).filter(Boolean).sort((a, b) => a - b);
  const recoveries = world.restarts
    .filter((r) => r.name === world.processes[0].name)
    .map((r) => (replyTimes.find((t) => t > r.at) ?? NaN) - r.at)
    .filter((ms) => Number.isFinite(ms))
    .sort((a, b) => a - b);
  report.recoveryMs = { p50: percentile(recoveries, 50), p99: percentile(recoveries, 99), count: recoveries.length };
  report.seconds = Math.round((Date.now() - started) / 1000);
  // What the database knows of the first few that went wrong.
  for (const label of [...report.lost, ...report.stuck, ...report.duplicated].slice(0, 8)) {
    const token = /:(\w+)/.exec(label.split(' ')[2] ?? '')?.[1];
    if (!token) continue;
    // The turns that mention it, each with its whole transcript, its outbox rows and its approvals; reminders by name.
    const turns = await world.sql<{ id: string; kind: string; status: string; error: string | null; job_id: string | null }[]>`
      select t.id::text, t.kind, t.status, t.error, t.job_id from turns t
      where t.id in (select turn_id from messages where content::text ~ ${`\\m${token}\\M`}) order by t.started_at`;
    const story: unknown[] = [];
    for (const turn of turns) {
      const messages = await world.sql`select seq, role, left(content::text, 160) as content, created_at from messages where turn_id = ${turn.id} order by id`;
      const outbox = await world.sql`select id, dedupe_key, kind, status, error, left(text, 80) as text, attempts, created_at, claimed_at, sent_at, claimed_by,
          claimed_by in (select application_name from pg_stat_activity where application_name is not null) as claimer_alive
        from outbound_messages where turn_id = ${turn.id} order by id`;
      const questions = await world.sql`select id, kind, status, answer, answered_via, expired_reason, created_at, answered_at from questions where turn_id = ${turn.id}`;
      story.push({ turn, messages, outbox, questions });
    }
    const reminders = await world.sql`select id, name, status, due_at, last_fired_at from reminders where name = ${token}`.catch((err: Error) => err.message);
    const loose = await world.sql`select id, dedupe_key, kind, status, turn_id, left(text, 80) as text, claimed_by from outbound_messages
      where text ~ ${`\\m${token}\\M`} and (turn_id is null or turn_id not in (select id from turns where id in (select turn_id from messages where content::text ~ ${`\\m${token}\\M`})))`;
    report.diagnosis.push(`${label}: ${JSON.stringify({ story, reminders, outboxElsewhere: loose })}`);
  }
  if (report.lost.length || report.duplicated.length || report.stuck.length) log(`keeping the logs and the database: ${world.scratch} (${world.databaseUrl}${world.postgres ? '; its data directory is in there' : ''})`);
  if (report.lost.length || report.duplicated.length || report.stuck.length) process.env.FAULTS_KEEP ??= '1';
  await world.close();
  return report;
}

function inboundHas(inbound: Set<string>, s: { platform: string; ref: string }): boolean {
  for (const key of inbound) if (key.startsWith(`${s.platform}:`) && key.includes(s.ref)) return true;
  return false;
}

export function formatReport(r: FaultReport): string {
  const mb = (b: number) => `${(b / 1024 / 1024).toFixed(0)} MB`;
  const lines = [
    `Fault run: ${r.seconds} s`,
    `  messages sent: ${r.sent.telegram + r.sent.discord + r.sent.slack} (Telegram ${r.sent.telegram}, Discord ${r.sent.discord}, Slack ${r.sent.slack}; mentions in a group ${r.mentions.telegram}/${r.mentions.discord}/${r.mentions.slack}); accepted ${r.accepted}, not taken by the platform's connection ${r.notAccepted.telegram + r.notAccepted.discord + r.notAccepted.slack} (Telegram ${r.notAccepted.telegram}, Discord ${r.notAccepted.discord}, Slack ${r.notAccepted.slack})`,
    `  approvals: ${r.clicks} clicks; allowed ${r.approvals.allowed}, denied ${r.approvals.denied}, expired ${r.approvals.expired}; reminders set ${r.reminders}, fired ${r.remindersFired}`,
    `  kills (SIGKILL): ${r.kills}; processes stopped (SIGSTOP) past the hung period: ${r.stops}, of which exited fenced when resumed: ${r.fencedExits}; ` +
      `Postgres restarts: ${r.postgresRestarts}; exits nobody caused: ${r.crashes}`,
    `  faults: ${Object.entries(r.faults).sort().map(([k, v]) => `${k} ${v}`).join(', ') || 'none'}`,
    `  lost = ${r.lost.length}, duplicated = ${r.duplicated.length}, stuck = ${r.stuck.length}, out of order = ${r.outOfOrder.length}, failed visibly = ${r.failedVisibly}`,
    `  sent twice on Telegram after a kill between its accepting and the sent mark (it takes no idempotency key) = ${r.resentAfterKill.length}`,
    `  tools run without approval = ${r.unapprovedRuns.length}, tools run twice = ${r.toolRanTwice.length}, internal text in a chat = ${r.internalText.length}, unexpected messages = ${r.unexpected.length}`,
    `  recovery after a kill (restart to the next reply): p50 ${r.recoveryMs.p50} ms, p99 ${r.recoveryMs.p99} ms over ${r.recoveryMs.count}`,
    `  RSS per process: first ${mb(r.rss.firstBytes)}, last ${mb(r.rss.lastBytes)}, peak ${mb(r.rss.peakBytes)}; tables: ${mb(r.tables.firstBytes)} → ${mb(r.tables.lastBytes)}`,
  ];
  for (const [title, list] of [
    ['lost', r.lost],
    ['duplicated', r.duplicated],
    ['sent twice on Telegram after a kill mid-send', r.resentAfterKill],
    ['stuck', r.stuck],
    ['out of order', r.outOfOrder],
    ['run without approval', r.unapprovedRuns],
    ['run twice', r.toolRanTwice],
    ['internal text', r.internalText],
    ['unexpected', r.unexpected],
    ['stopped processes that did not exit fenced', r.badStopExits],
  ] as const) {
    if (list.length) lines.push(`  ${title}:`, ...list.slice(0, 20).map((l) => `    ${l}`));
  }
  if (r.diagnosis.length) lines.push('  what the database says:', ...r.diagnosis.map((l) => `    ${l.slice(0, 1500)}`));
  if (r.crashTails.length) lines.push('  exits nobody caused:', ...r.crashTails.slice(0, 5).map((l) => `    ${l}`));
  return lines.join('\n');
}
