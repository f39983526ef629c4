import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { getTableColumns } from 'drizzle-orm';
import type { PgTable } from 'drizzle-orm/pg-core';
import { drizzle, type PostgresJsDatabase } from 'drizzle-orm/postgres-js';
import { migrate } from 'drizzle-orm/postgres-js/migrator';
import postgres from 'postgres';
import { DatabaseUnavailableError } from './embedded-postgres-error.ts';
import * as schema from './schema.ts';

export type Db = PostgresJsDatabase<typeof schema>;
/** A drizzle handle or one of its transactions: every named query takes this. */
export type Queryable = Pick<Db, 'select' | 'insert' | 'update' | 'delete' | 'execute'>;

export interface Database {
  url: string;
  /** This pool's session name (`parlor:<pid>:<random>`): other processes see it in pg_stat_activity while it lives. */
  applicationName: string;
  sql: postgres.Sql;
  db: Db;
  /**
   * The same database through connections whose commits do not wait for the WAL to reach the disk (asynchronous
   * commit), for a turn's bookkeeping only: its start, its transcript and its end. A crash of Postgres may lose the
   * last fraction of a second of them, never anything after a later ordinary commit (the WAL is flushed in order),
   * and a turn rerun after such a crash writes them again. Never for what must survive a crash by itself: the inbound
   * message and its job, the ledger row before a send, the sent mark after it. A turn whose start was lost while it
   * ran on is stopped when it writes to the ledger (TurnGone): the messages it read are read again by a new start.
   */
  bookkeeping: Db;
  /**
   * One connection of its own, under the same session name, for the process's heartbeat: it connects whatever the
   * gate says (see `gate`).
   */
  beatSql: postgres.Sql;
  /**
   * Asked before any new connection of `sql` and `bookkeeping` is made, and before each of pg-boss's statements (the
   * heartbeat sets it): a process back from a long stop finds every connection terminated if it was fenced meanwhile,
   * and must learn that before it writes anything on a new one.
   */
  gate: ConnectGate;
  close(): Promise<void>;
}

export interface ConnectGate {
  before?: () => Promise<void>;
}

export { DatabaseUnavailableError };

/**
 * Every connection of a pool carries one name, so processes sharing a database can see each other (and whether the
 * process waiting for something is still alive).
 */
function newApplicationName(): string {
  return `parlor:${process.pid}:${randomBytes(4).toString('hex')}`;
}

/** Where postgres.js connects, when the URL says it in parameters. */
interface TargetOptions {
  path?: string;
  host?: string;
  port?: number;
}

/**
 * What postgres.js is given for a database URL. libpq's `host` and `port` parameters name the server
 * (`postgres:///parlor?host=/run/postgresql`, the usual way to reach a server on the same machine through its Unix
 * socket): a directory is where its socket is, as node-postgres (pg-boss's driver) reads it too. postgres.js alone
 * would send them to the server as settings, which it refuses.
 */
export function postgresTarget(url: string): { url: string; options: TargetOptions } {
  const parsed = new URL(url);
  const host = parsed.searchParams.get('host');
  const port = parsed.searchParams.get('port');
  if (host === null && port === null) return { url, options: {} };
  parsed.searchParams.delete('host');
  parsed.searchParams.delete('port');
  const options: TargetOptions = {};
  if (port !== null) options.port = Number(port);
  if (host?.startsWith('/')) options.path = path.join(host, `.s.PGSQL.${port ?? (parsed.port || '5432')}`);
  else if (host) options.host = host;
  return { url: parsed.toString(), options };
}

/** postgres.js's resolved connection options, as it hands them to a socket factory. */
interface SocketOptions {
  host: string[];
  port: number[];
  path?: string | false;
}

/**
 * A socket factory for postgres.js that asks the gate first, then connects as postgres.js would (TLS, when asked for,
 * is still negotiated by postgres.js over it; a database URL names one server, see postgresTarget). It never throws:
 * postgres.js leaves a connection whose factory threw stuck as connecting, for good. It returns the socket while it
 * connects (what postgres.js writes meanwhile waits for it), or, when the gate could not ask, one that fails with the
 * gate's error, as a refused connection does, so postgres.js retries as it would.
 */
function gatedSocket(gate: ConnectGate) {
  return async (options: SocketOptions): Promise<net.Socket> => {
    try {
      await gate.before?.();
    } catch (err) {
      const failed = new net.Socket();
      // Once postgres.js listens (it does as soon as this resolves), and before its first write goes out.
      setImmediate(() => failed.destroy(err as Error));
      return failed;
    }
    if (options.path) return net.connect(options.path);
    const socket = net.connect(options.port[0], options.host[0]);
    // For TLS: the name postgres.js gives the server.
    (socket as net.Socket & { host?: string }).host = options.host[0];
    return socket;
  };
}

export async function connectDatabase(url: string, options: { max?: number } = {}): Promise<Database> {
  const applicationName = newApplicationName();
  const target = postgresTarget(url);
  const gate: ConnectGate = {};
  // postgres.js takes a socket factory (`socket`), which its types do not declare.
  const gated = { socket: gatedSocket(gate) } as object;
  const sql = postgres(target.url, {
    ...target.options,
    ...gated,
    max: options.max ?? 10,
    onnotice: () => {},
    connection: { application_name: applicationName },
    connect_timeout: 10,
  });
  try {
    await sql`select 1`;
  } catch (err) {
    await sql.end({ timeout: 1 }).catch(() => {});
    throw new DatabaseUnavailableError(
      `cannot connect to the database at ${redactUrl(url)} (${describeError(err)}). ` +
        'Check DATABASE_URL, or unset it to use the embedded Postgres.',
      { cause: err },
    );
  }
  const db = drizzle(preparing(sql), { schema });
  // Connects when first used and lets idle connections go; the same session name, so other processes see one process.
  const relaxed = postgres(target.url, {
    ...target.options,
    ...gated,
    max: options.max ?? 10,
    idle_timeout: 60,
    onnotice: () => {},
    connection: { application_name: applicationName, synchronous_commit: 'off' },
    connect_timeout: 10,
  });
  const bookkeeping = drizzle(preparing(relaxed), { schema });
  const beatSql = postgres(target.url, {
    ...target.options,
    max: 1,
    onnotice: () => {},
    connection: { application_name: applicationName },
    connect_timeout: 10,
  });
  return {
    url,
    applicationName,
    sql,
    db,
    bookkeeping,
    beatSql,
    gate,
    close: async () => {
      await Promise.all([sql.end({ timeout: 5 }), relaxed.end({ timeout: 5 }), beatSql.end({ timeout: 5 })]);
    },
  };
}

/**
 * drizzle runs its queries unprepared, so Postgres parses and plans each one again. Its query texts are
 * parameterised and few, so letting postgres.js prepare them (and cache the plans per connection) is safe and
 * saves a parse per query on every turn.
 */
function preparing<T extends postgres.Sql | postgres.TransactionSql>(sql: T): T {
  const unsafe: postgres.Sql['unsafe'] = (query, params, options) => sql.unsafe(query, params, { ...options, prepare: true });
  const begin = (...args: unknown[]) => {
    const fn = args.pop() as (tx: postgres.TransactionSql) => unknown;
    return ((sql as postgres.Sql).begin as (...a: unknown[]) => unknown)(...args, (tx: postgres.TransactionSql) => fn(preparing(tx)));
  };
  return new Proxy(sql, {
    get: (target, prop, receiver) => (prop === 'unsafe' ? unsafe : prop === 'begin' ? begin : Reflect.get(target, prop, receiver)),
  });
}

/**
 * The postgres.js client under a drizzle handle or one of its transactions. The statements every turn runs are
 * written with it: drizzle's builder costs more CPU than Postgres spends on such a statement (a few ms per turn).
 */
export function clientOf(db: Queryable): postgres.Sql {
  return ((db as Db)._.session as unknown as { client: postgres.Sql }).client;
}

/**
 * Reads rows as Postgres names their columns into the table's rows as drizzle returns them: property names, and
 * values through each column's own mapping (drizzle's client hands timestamps over as text).
 */
export function rowReader<T extends PgTable>(table: T): (raw: Record<string, unknown>) => T['$inferSelect'] {
  const columns = Object.entries(getTableColumns(table)).map(([key, column]) => ({ key, name: column.name, column }));
  return (raw) => {
    const row: Record<string, unknown> = {};
    for (const { key, name, column } of columns) {
      const value = raw[name];
      row[key] = value === null || value === undefined ? null : column.mapFromDriverValue(value);
    }
    return row as T['$inferSelect'];
  };
}

/** `migrations/` beside package.json, found from this module whether it runs from src/ or from the bundle. */
function findMigrationsFolder(): string {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  while (!existsSync(path.join(dir, 'package.json')) && path.dirname(dir) !== dir) dir = path.dirname(dir);
  return path.join(dir, 'migrations');
}

const migrationsFolder = findMigrationsFolder();
const MIGRATION_LOCK = 7_210_455_001;

/** Applies pending migrations; concurrent processes wait for each other on an advisory lock. */
export async function migrateDatabase(database: Database): Promise<void> {
  const reserved = await database.sql.reserve();
  try {
    await reserved`select pg_advisory_lock(${MIGRATION_LOCK})`;
    await migrate(database.db, { migrationsFolder }).catch((err: unknown) => {
      const cause = (err as { cause?: unknown }).cause ?? err;
      throw new DatabaseUnavailableError(
        `the database at ${redactUrl(database.url)} could not be migrated (${describeError(cause)}); ` +
          'was it created by another application or a newer Parlor?',
        { cause: err },
      );
    });
  } finally {
    await reserved`select pg_advisory_unlock(${MIGRATION_LOCK})`.catch(() => {});
    reserved.release();
  }
}

export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return '(unparseable URL)';
  }
}

export function describeError(err: unknown): string {
  if (err && typeof err === 'object') {
    const e = err as { code?: string; message?: string; errors?: unknown[] };
    if (Array.isArray(e.errors) && e.errors.length) return describeError(e.errors[0]);
    if (e.code && e.message) return `${e.code}: ${e.message}`;
    if (e.message) return e.message;
  }
  return String(err);
}

/**
 * Runs statements in one transaction in one round trip: BEGIN, the statements and COMMIT go out together on one
 * connection, and Postgres answers them in order. A statement that fails aborts the transaction (its COMMIT then rolls
 * back) and fails the whole, with nothing written. `issue` sends the statements on the connection it is given and
 * resolves, with their results to come, once every one has been sent (postgres.js sends a query a moment after it is
 * first awaited or executed, in the order they were); none may depend on another's result. Whatever the results say,
 * the transaction is committed: a caller that would rather not have kept it undoes it. For the hot path only.
 * `after` issues one more statement right behind the COMMIT, in the same write: a transaction of its own, whatever
 * became of the first (the caller reads its outcome from the promise it returns); the connection is kept until it ends.
 */
export async function inOneTrip<T extends readonly unknown[]>(
  sql: postgres.Sql,
  issue: (c: postgres.ReservedSql) => Promise<{ [K in keyof T]: PromiseLike<T[K]> }>,
  after?: (c: postgres.ReservedSql) => PromiseLike<unknown>,
): Promise<T> {
  const c = await sql.reserve();
  let behind: PromiseLike<unknown> | undefined;
  try {
    const begin = c`begin`.execute();
    let pending: { [K in keyof T]: PromiseLike<T[K]> };
    try {
      pending = await issue(c);
    } catch (err) {
      // Some statements may have gone out without their COMMIT.
      await Promise.allSettled([begin, c`rollback`]);
      throw err;
    }
    const commit = c`commit`.execute();
    behind = after?.(c);
    const settled = await Promise.allSettled([begin, ...pending, commit]);
    const failed = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected');
    // A failed statement's COMMIT rolled back (Postgres answers COMMIT in an aborted transaction with ROLLBACK).
    if (failed) throw failed.reason;
    return settled.slice(1, -1).map((s) => (s as PromiseFulfilledResult<unknown>).value) as unknown as T;
  } finally {
    if (behind) void Promise.resolve(behind).then(c.release, c.release);
    else c.release();
  }
}
