// Where a turn's time goes, from outside the process that runs it: its CPU and peak RSS (/proc), the Postgres
// server's CPU (the postmaster, its live backends and those that have exited), the statements and writing commits
// Postgres saw (pg_stat_statements, the next transaction id), and a CPU profile of the process taken through its
// inspector, summed by package. Linux only; what cannot be read is reported as undefined.
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type postgres from 'postgres';
import { WebSocket } from 'ws';

const TICK_MS = 10; // CLK_TCK is 100 on Linux

function statFields(pid: number): string[] | undefined {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name is in parentheses and may hold spaces: the fields start after its closing one.
    return text.slice(text.lastIndexOf(')') + 2).split(' ');
  } catch {
    return undefined;
  }
}

/**
 * The time a process's threads have spent on a CPU so far, in ms: its main thread and all of them. From the
 * scheduler's own account (to the nanosecond; /proc's stat counts whole ticks of 10 ms, sampled, which blurs a run of
 * a second into ±10 %); undefined where Linux does not keep it. A thread that exits between two readings takes its
 * time with it: the threads of Node and of a Postgres backend live as long as their process.
 */
function scheduledMs(pid: number): { main: number; all: number } | undefined {
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      let main = 0;
      let all = 0;
      for (const task of readdirSync(`/proc/${pid}/task`)) {
        const ns = Number(readFileSync(`/proc/${pid}/task/${task}/schedstat`, 'utf8').split(' ')[0]);
        all += ns;
        if (task === String(pid)) main = ns;
      }
      return Number.isFinite(all) ? { main: main / 1e6, all: all / 1e6 } : undefined;
    } catch {
      // A thread ended while its siblings were read: read them again.
    }
  }
  return undefined;
}

/** What a process (its `stat` fields read already) has spent on a CPU so far, ms: by the scheduler, else by ticks. */
function spentMs(pid: number, fields: string[]): number {
  // After the name: state(0) ppid(1) … utime(11) stime(12).
  return scheduledMs(pid)?.all ?? (Number(fields[11]) + Number(fields[12])) * TICK_MS;
}

/**
 * A Node process's CPU so far, in ms, split between its main thread (where its JavaScript runs) and the rest: V8's
 * background threads (optimising compilation, the garbage collector's helpers) and libuv's pool (file system calls).
 */
export function threadsCpuMs(pid: number): { main: number; background: number } | undefined {
  const spent = scheduledMs(pid);
  return spent && { main: spent.main, background: spent.all - spent.main };
}

/** What a process spent between two readings of threadsCpuMs, per DM once `dms` were sent. */
export function threadsCpuPerDm(
  a: ReturnType<typeof threadsCpuMs>,
  b: ReturnType<typeof threadsCpuMs>,
  dms: number,
): { main: number; background: number } | undefined {
  return a && b && { main: (b.main - a.main) / dms, background: (b.background - a.background) / dms };
}

/** The whole machine's CPU time so far, busy and in all, in ticks of every core together (/proc/stat). */
export function machineCpuTicks(): { busy: number; total: number } | undefined {
  try {
    // cpu  user nice system idle iowait irq softirq steal …
    const fields = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1, 9).map(Number);
    const total = fields.reduce((a, b) => a + b, 0);
    return { busy: total - fields[3] - fields[4], total };
  } catch {
    return undefined;
  }
}

/** User + system CPU of a process so far, in ms (with `children`, also what its exited children used). */
export function processCpuMs(pid: number, children = false): number | undefined {
  const f = statFields(pid);
  if (!f) return undefined;
  // After the name: … cutime(13) cstime(14).
  return spentMs(pid, f) + (children ? (Number(f[13]) + Number(f[14])) * TICK_MS : 0);
}

/** Peak and current RSS of a process in MB (VmHWM, VmRSS). */
export function processRssMb(pid: number): { peak: number; now: number } | undefined {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = (key: string) => Number(new RegExp(`^${key}:\\s+(\\d+)`, 'm').exec(status)?.[1] ?? NaN);
    return { peak: kb('VmHWM') / 1024, now: kb('VmRSS') / 1024 };
  } catch {
    return undefined;
  }
}

/** Starts the process's peak RSS (VmHWM) afresh from what it holds now (Linux: clear_refs 5); false where it cannot. */
export function resetPeakRss(pid: number): boolean {
  try {
    writeFileSync(`/proc/${pid}/clear_refs`, '5');
    return true;
  } catch {
    return false;
  }
}

/** The CPU of a Postgres server's processes at one moment (see postgresCpuBetween). */
export interface PostgresCpuSample {
  /** The postmaster's own CPU, and what its exited children used (it waits for them). */
  postmaster: number;
  exited: number;
  /** Its live children: CPU so far, and what each is (backend, walwriter, checkpointer, autovacuum worker…). */
  children: Map<number, { kind: string; ms: number }>;
}

/** What a server process is, from its title (`postgres: walwriter`, `postgres: parlor parlor [local] idle`). */
function processKind(pid: number): string {
  try {
    const title = readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ').trim();
    const kind = title.replace(/^postgres:\s*/, '');
    if (/\[local\]|\d+\.\d+\.\d+\.\d+|::1|\bidle\b/.test(kind)) return 'connections';
    return kind.replace(/\s+\d.*$/, '').trim() || 'other';
  } catch {
    return 'other';
  }
}

/** The CPU of the whole Postgres server under `dataDir` so far (undefined when it cannot be read). */
export function postgresCpuSample(dataDir: string | undefined): PostgresCpuSample | undefined {
  if (!dataDir) return undefined;
  let postmaster: number;
  try {
    postmaster = Number(readFileSync(path.join(dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
  } catch {
    return undefined;
  }
  const own = statFields(postmaster);
  if (!own) return undefined;
  const children = new Map<number, { kind: string; ms: number }>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const f = statFields(Number(entry));
    if (f && Number(f[1]) === postmaster) children.set(Number(entry), { kind: processKind(Number(entry)), ms: spentMs(Number(entry), f) });
  }
  return { postmaster: spentMs(postmaster, own), exited: (Number(own[13]) + Number(own[14])) * TICK_MS, children };
}

/**
 * What the server spent between two samples, in ms: in all, and by kind of process. A process that exited in
 * between counts under `exited` (with any that started and exited in between: autovacuum workers, closed connections).
 */
export function postgresCpuBetween(a: PostgresCpuSample | undefined, b: PostgresCpuSample | undefined): { total: number; byKind: Map<string, number> } | undefined {
  if (!a || !b) return undefined;
  const byKind = new Map<string, number>();
  const add = (kind: string, ms: number) => byKind.set(kind, (byKind.get(kind) ?? 0) + ms);
  add('postmaster', b.postmaster - a.postmaster);
  for (const [pid, child] of b.children) add(child.kind, child.ms - (a.children.get(pid)?.ms ?? 0));
  let vanished = 0;
  for (const [pid, child] of a.children) if (!b.children.has(pid)) vanished += child.ms;
  add('exited', b.exited - a.exited - vanished);
  return { total: [...byKind.values()].reduce((sum, ms) => sum + ms, 0), byKind };
}

export interface StatementStats {
  /** Statements of the database, by query text (normalised by pg_stat_statements). */
  byQuery: { query: string; calls: number; plans: number; ms: number; planMs: number }[];
  calls: number;
  /** Time Postgres spent planning them (0 unless pg_stat_statements.track_planning is on). */
  planMs: number;
  /** Time Postgres spent executing them (planning not included). */
  ms: number;
}

/** Starts counting the database's statements afresh (false when pg_stat_statements is not there). */
export async function resetStatements(sql: postgres.Sql): Promise<boolean> {
  return sql`select pg_stat_statements_reset()`.then(
    () => true,
    () => false,
  );
}

/**
 * Turns pg_stat_statements' tracking on or off for the whole server (it stays loaded): tracking costs Postgres CPU
 * of its own, which a server without it does not spend. False when it could not (not a superuser, or not there).
 */
export async function trackStatements(sql: postgres.Sql, on: boolean): Promise<boolean> {
  try {
    await sql.unsafe(`alter system set pg_stat_statements.track = '${on ? 'top' : 'none'}'`);
    await sql`select pg_reload_conf()`;
    // Each backend reloads its settings when it is next between statements; idle ones at once.
    await new Promise((resolve) => setTimeout(resolve, 300));
    return true;
  } catch {
    return false;
  }
}

/** The statements run in this database since the last reset, without the benchmark's own. */
export async function readStatements(sql: postgres.Sql): Promise<StatementStats | undefined> {
  const rows = await sql<{ query: string; calls: number; plans: number; ms: number; planMs: number }[]>`
    select query, calls::int as calls, plans::int as plans, total_exec_time as ms, total_plan_time as "planMs" from pg_stat_statements
    where dbid = (select oid from pg_database where datname = current_database())
      and query not like '%pg_stat_statements%' and query not like '%pg_current_snapshot%'
    order by calls desc`.catch(() => undefined);
  if (!rows) return undefined;
  const sum = (pick: (r: StatementStats['byQuery'][number]) => number) => rows.reduce((n, r) => n + pick(r), 0);
  return { byQuery: rows, calls: sum((r) => r.calls), ms: sum((r) => r.ms), planMs: sum((r) => r.planMs) };
}

/** The next transaction id: its difference over a run is the number of transactions that wrote (and committed or rolled back). */
export async function nextTransactionId(sql: postgres.Sql): Promise<number> {
  const [row] = await sql<{ xid: string }[]>`select pg_snapshot_xmax(pg_current_snapshot())::text as xid`;
  return Number(row.xid);
}

/**
 * WAL flushes (fsyncs) of the whole server so far, from pg_stat_io; backends report theirs within a second of
 * going idle, so read it a little after a run ends. Undefined before Postgres 16.
 */
export async function walFlushes(sql: postgres.Sql): Promise<number | undefined> {
  const rows = await sql<{ n: string | null }[]>`select sum(fsyncs)::text as n from pg_stat_io where object = 'wal'`.catch(() => undefined);
  return rows?.[0]?.n == null ? undefined : Number(rows[0].n);
}

/** A short name for a statement: pg-boss's are in its schema; BEGIN/COMMIT as they are. */
export function statementLabel(query: string): string {
  const flat = query.replace(/\s+/g, ' ').trim();
  return flat.length > 110 ? `${flat.slice(0, 107)}…` : flat;
}

// ---- CPU profile through the inspector ----

interface ProfileNode {
  id: number;
  callFrame: { url: string; functionName: string };
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

/** The area of the code a frame belongs to, by its file. */
export function areaOf(url: string, functionName: string): string {
  if (!url) {
    if (functionName === '(garbage collector)') return 'garbage collection';
    if (functionName === '(idle)') return 'idle';
    if (functionName === '(program)' || functionName === '(root)') return 'V8 and native (program)';
    return 'native';
  }
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(url)?.[1];
  if (pkg) {
    if (pkg === 'drizzle-orm') return 'drizzle (query building, row mapping)';
    if (pkg === 'postgres') return 'postgres.js (Parlor’s driver)';
    if (pkg === 'pg' || pkg === 'pg-protocol' || pkg === 'pg-pool' || pkg === 'pg-types' || pkg === 'postgres-array' || pkg === 'postgres-date' || pkg === 'pgpass')
      return 'node-postgres (pg-boss’s driver)';
    if (pkg === 'pg-boss') return 'pg-boss';
    if (pkg === 'openai' || pkg === '@anthropic-ai/sdk') return 'model client (SDK)';
    if (pkg === 'grammy' || pkg.startsWith('@grammyjs/')) return 'grammY';
    if (pkg === 'hono' || pkg.startsWith('@hono/')) return 'HTTP server (Hono)';
    if (pkg.startsWith('pino') || pkg === 'sonic-boom' || pkg === 'thread-stream') return 'logging (pino)';
    if (pkg === 'ajv') return 'ajv';
    if (pkg === 'tsx' || pkg === 'esbuild' || pkg === 'get-tsconfig') return 'TypeScript loader';
    return `other packages (${pkg})`;
  }
  if (url.startsWith('node:') || !url.includes('/')) return 'Node (HTTP, sockets, streams, timers)';
  if (/\/src\/llm\//.test(url)) return 'model client (Parlor’s adapter)';
  if (/\/src\/db\//.test(url)) return 'Parlor: named queries (src/db)';
  if (/\/connectors\//.test(url)) return 'Parlor: connectors';
  if (/\/(src|tools)\//.test(url) || /\/dist\//.test(url)) return 'Parlor: the rest of its code';
  return 'other';
}

// At the root of every stack (the event loop's callbacks) or nowhere: an inclusive figure says nothing for them.
const NO_INCLUSIVE = new Set(['V8 and native (program)', 'Node (HTTP, sockets, streams, timers)', 'native', 'garbage collection']);

/** CPU ms by area: self (where the sample's top frame is) and inclusive (the area anywhere on the stack). */
export function summariseProfile(profile: Profile): {
  self: Map<string, number>;
  inclusive: Map<string, number>;
  /** Self ms by function (`name file:line`), for a closer look. */
  functions: Map<string, number>;
  sampledMs: number;
} {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const self = new Map<string, number>();
  const inclusive = new Map<string, number>();
  const functions = new Map<string, number>();
  let sampledMs = 0;
  const areasOnStack = new Map<number, Set<string>>();
  const stackAreas = (id: number): Set<string> => {
    let areas = areasOnStack.get(id);
    if (areas) return areas;
    const node = byId.get(id)!;
    const up = parent.get(id);
    areas = new Set(up === undefined ? [] : stackAreas(up));
    areas.add(areaOf(node.callFrame.url, node.callFrame.functionName));
    areasOnStack.set(id, areas);
    return areas;
  };
  for (let i = 0; i < profile.samples.length; i++) {
    // A sample's time is the gap to the next one.
    const ms = (profile.timeDeltas[i + 1] ?? 0) / 1000;
    const node = byId.get(profile.samples[i])!;
    const area = areaOf(node.callFrame.url, node.callFrame.functionName);
    if (area === 'idle') continue;
    sampledMs += ms;
    self.set(area, (self.get(area) ?? 0) + ms);
    const { functionName, url } = node.callFrame as { functionName: string; url: string; lineNumber?: number };
    const fn = `${functionName || '(anonymous)'} ${url.replace(/^.*node_modules\//, '').replace(/^file:\/\/.*?\/(src|connectors|tools)\//, '$1/')}:${(node.callFrame as { lineNumber?: number }).lineNumber ?? ''}`;
    functions.set(fn, (functions.get(fn) ?? 0) + ms);
    for (const a of stackAreas(node.id)) if (!NO_INCLUSIVE.has(a)) inclusive.set(a, (inclusive.get(a) ?? 0) + ms);
  }
  return { self, inclusive, functions, sampledMs };
}

interface AllocationNode {
  callFrame: { functionName: string; url: string; lineNumber: number };
  selfSize: number;
  children: AllocationNode[];
}

/** A CPU profiler on a process started with `--inspect`, driven over its DevTools socket. */
export async function connectProfiler(wsUrl: string) {
  const socket = new WebSocket(wsUrl);
  await new Promise<void>((resolve, reject) => {
    socket.once('open', () => resolve());
    socket.once('error', reject);
  });
  let nextId = 1;
  const pending = new Map<number, { resolve: (result: unknown) => void; reject: (err: Error) => void }>();
  socket.on('message', (data) => {
    const message = JSON.parse(String(data)) as { id?: number; result?: unknown; error?: unknown };
    const waiter = message.id === undefined ? undefined : pending.get(message.id);
    if (!waiter) return;
    pending.delete(message.id!);
    if (message.error) waiter.reject(new Error(`inspector: ${JSON.stringify(message.error)}`));
    else waiter.resolve(message.result);
  });
  const call = <T>(method: string, params: object = {}) =>
    new Promise<T>((resolve, reject) => {
      const id = nextId++;
      pending.set(id, { resolve: resolve as (r: unknown) => void, reject });
      socket.send(JSON.stringify({ id, method, params }));
    });
  await call('Profiler.enable');
  await call('Profiler.setSamplingInterval', { interval: 250 });
  return {
    start: () => call('Profiler.start'),
    stop: async () => (await call<{ profile: Profile }>('Profiler.stop')).profile,
    /** Samples allocations (every 32 KB), the collected ones too: where the garbage comes from. */
    startAllocations: () =>
      call('HeapProfiler.startSampling', { samplingInterval: 32 * 1024, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true }),
    /** Bytes allocated by function (`name file:line`), since startAllocations. */
    stopAllocations: async () => {
      const { profile } = await call<{ profile: { head: AllocationNode } }>('HeapProfiler.stopSampling');
      const bySite = new Map<string, number>();
      const walk = (node: AllocationNode) => {
        const { functionName, url, lineNumber } = node.callFrame;
        const site = `${functionName || '(anonymous)'} ${url.replace(/^.*node_modules\//, '').replace(/^file:\/\/.*?\/(src|connectors|tools|dist)\//, '$1/')}:${lineNumber}`;
        if (node.selfSize) bySite.set(site, (bySite.get(site) ?? 0) + node.selfSize);
        for (const child of node.children) walk(child);
      };
      walk(profile.head);
      return bySite;
    },
    /** The process's own `process.memoryUsage()`, in MB. */
    memory: async () => {
      const { result } = await call<{ result: { value: string } }>('Runtime.evaluate', { expression: 'JSON.stringify(process.memoryUsage())' });
      const bytes = JSON.parse(result.value) as Record<'rss' | 'heapTotal' | 'heapUsed' | 'external' | 'arrayBuffers', number>;
      return Object.fromEntries(Object.entries(bytes).map(([k, v]) => [k, v / 1024 / 1024])) as typeof bytes;
    },
    close: () => socket.close(),
  };
}
