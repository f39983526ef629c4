import type { Logger } from 'pino';
import type { Database } from '#src/db/client.ts';
import { beat, endBeats } from '#src/db/sessions.ts';
import { databaseUnavailable } from '#src/db/unavailable.ts';

/** How long a process may go without beating, its connections open, before the others fence it (see sessions.ts). */
export const DEFAULT_HUNG_AFTER_MS = 30_000;
/** Beats per hung period: a process late by a few beats is still far from being fenced. */
const BEATS_PER_PERIOD = 6;

export interface ProcessBeat {
  /** How long a session may go without beating before it is fenced. */
  hungAfterMs: number;
  /**
   * Whether this process has beaten without a gap for a whole hung period: only then may it judge others hung. A
   * process back from being stopped itself, or from a database outage, sees everyone's beats as old until theirs
   * resume too.
   */
  steady(): boolean;
  /**
   * Awaited before this process writes to a platform what no write to the database comes before (a streamed reply, a
   * send's attempt): resolves at once while its last beat is recent, else after a beat (it may have been fenced while
   * it was away); never once it was fenced (it exits then). A database that cannot answer holds nothing back.
   */
  beforeAct(): Promise<void>;
  /** Stops beating and takes this process's row away (a clean stop). */
  stop(): Promise<void>;
}

/**
 * This process's heartbeat: its row in process_beats renewed every sixth of the hung period, over a connection of its
 * own. Should a beat find the session fenced (the others took it for hung and took its work over), `onFenced` is
 * called: the process must stop at once. And it must write nothing before: fencing terminated its connections, so
 * a process back from a stop needs new ones, and while its last beat is older than half the hung period (as it is
 * then), a new connection, and each statement of pg-boss, waits for a beat first (the database's gate), which finds
 * it fenced.
 */
export async function startProcessBeat(deps: {
  database: Database;
  log: Logger;
  hungAfterMs?: number;
  onFenced: () => void;
}): Promise<ProcessBeat> {
  const hungAfterMs = deps.hungAfterMs ?? DEFAULT_HUNG_AFTER_MS;
  const everyMs = Math.max(100, Math.floor(hungAfterMs / BEATS_PER_PERIOD));
  const { beatSql, applicationName: session, gate } = deps.database;
  let lastBeat = Date.now();
  let steadySince = lastBeat;
  let fenced = false;
  let beating: Promise<boolean> | undefined;
  const never = new Promise<never>(() => {});

  await beat(beatSql, session, true);

  /** Beats now; false once fenced (and onFenced called). Errors are the database's. */
  async function beatNow(): Promise<boolean> {
    if (fenced) return false;
    // A beat vouches for the moment it was sent, not for when its answer was read: a process stopped while its answer
    // was on the way reads it when it runs again, perhaps fenced meanwhile.
    const sentAt = Date.now();
    if (!(await beat(beatSql, session, false))) {
      if (!fenced) {
        fenced = true;
        clearInterval(timer);
        deps.onFenced();
      }
      return false;
    }
    // Wall-clock time, which runs on while the machine sleeps: a gap is a gap however it came about.
    if (sentAt - lastBeat > 2 * everyMs) steadySince = sentAt;
    lastBeat = sentAt;
    return true;
  }

  /** One beat at a time: the timer's and one asked for by `alive` share it. */
  const beatOnce = () => (beating ??= beatNow().finally(() => (beating = undefined)));

  const timer = setInterval(() => {
    beatOnce().catch((err: unknown) => {
      if (!databaseUnavailable(err)) deps.log.warn({ err }, 'the process heartbeat failed');
    });
  }, everyMs);
  timer.unref();

  /** True at once while the last beat is recent; else after a beat, false when that finds the session fenced. */
  const alive = (): Promise<boolean> => {
    if (fenced) return Promise.resolve(false);
    if (Date.now() - lastBeat <= hungAfterMs / 2) return Promise.resolve(true);
    return beatOnce();
  };
  // Away for long enough that it may have been fenced: known before anything is written on a new connection. A
  // database still away fails the connection as it would have.
  gate.before = async () => {
    if (!(await alive())) await never;
  };

  return {
    hungAfterMs,
    async beforeAct() {
      if (!(await alive().catch(() => true))) await never;
    },
    steady() {
      const now = Date.now();
      return !fenced && now - lastBeat <= 2 * everyMs && now - steadySince >= hungAfterMs;
    },
    async stop() {
      clearInterval(timer);
      gate.before = undefined;
      await beating?.catch(() => {});
      if (!fenced) await endBeats(beatSql, session).catch(() => {});
    },
  };
}

/**
 * A fenced process stops at once, without the clean stop's steps: its turns, claims and locks are the others' now,
 * and anything it did on its way out could send a message twice. A supervisor (systemd, Compose) starts it again.
 */
export function exitFenced(log: Logger): void {
  log.fatal(
    'this process was stopped or cut off for longer than PARLOR_HUNG_AFTER_SECONDS with its database connections open; ' +
      'the other processes took its work over, so it exits now (start it again, or let its supervisor)',
  );
  // The line written first (the log may be asynchronous); meanwhile it can write nothing: its connections were
  // terminated, and a new one waits at the gate for good (see startProcessBeat).
  log.flush(() => process.exit(1));
  setTimeout(() => process.exit(1), 500);
}
