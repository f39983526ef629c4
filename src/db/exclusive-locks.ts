// What only one process may do at a time across a deployment (receive a bot token's long polling, a Discord gateway,
// a Slack socket): a session advisory lock, held on a connection of its own for as long as the process does it.
import type { Database } from './client.ts';

/** The first key of every lock taken here (the second is the hash of the lock's name). */
const NAMESPACE = 721_045;

export interface ExclusiveLocks {
  /** Takes the lock named `key`: true, or false when another process holds it (with that process's name). */
  take(key: string): Promise<{ taken: true } | { taken: false; holder?: string }>;
  /**
   * Checks every `intervalMs` that the locks are still held: a lost connection (a Postgres restart) takes its locks
   * with it, and each is taken again on a new one; one another process took meanwhile is reported to `onLost`.
   */
  watch(intervalMs: number, onLost: (key: string, holder?: string) => void): () => void;
  /** Releases every lock (the connection goes back to the pool). */
  release(): Promise<void>;
}

export function createExclusiveLocks(database: Pick<Database, 'sql'>): ExclusiveLocks {
  let reserved: Awaited<ReturnType<Database['sql']['reserve']>> | undefined;
  const held = new Set<string>();
  let checking = false;

  /** The locks this process's lock connection holds now (none when that connection is a new session). */
  async function stillHeld(): Promise<number> {
    const [row] = await reserved!<{ n: number }[]>`
      select count(*)::int as n from pg_locks
      where locktype = 'advisory' and classid = ${NAMESPACE}::oid and objsubid = 2 and pid = pg_backend_pid() and granted`;
    return row?.n ?? 0;
  }

  const locks: ExclusiveLocks = {
    async take(key) {
      if (held.has(key)) return { taken: true };
      reserved ??= await database.sql.reserve();
      const [row] = await reserved<{ taken: boolean }[]>`select pg_try_advisory_lock(${NAMESPACE}, hashtext(${key})) as taken`;
      if (row?.taken) {
        held.add(key);
        return { taken: true };
      }
      // Who holds it: its connection's name carries its pid (parlor:<pid>:...).
      const [holder] = await reserved<{ name: string | null; addr: string | null }[]>`
        select a.application_name as name, host(a.client_addr) as addr
        from pg_locks l join pg_stat_activity a on a.pid = l.pid
        where l.locktype = 'advisory' and l.classid = ${NAMESPACE}::oid and l.objsubid = 2
          and l.database = (select oid from pg_database where datname = current_database())
          and l.objid = (hashtext(${key})::bigint & 4294967295)::oid and l.granted
        limit 1`;
      return { taken: false, ...(holder?.name ? { holder: `${holder.name}${holder.addr ? ` from ${holder.addr}` : ''}` } : {}) };
    },
    watch(intervalMs, onLost) {
      const timer = setInterval(async () => {
        if (checking || held.size === 0) return;
        checking = true;
        try {
          const count = reserved ? await stillHeld().catch(() => -1) : -1;
          if (count === held.size) return;
          // The connection (or its session) went away, and its locks with it: taken again, unless someone has them.
          if (count < 0) {
            reserved?.release();
            reserved = undefined;
          }
          const keys = [...held];
          held.clear();
          for (const key of keys) {
            const again = await locks.take(key).catch(() => undefined);
            if (!again) held.add(key); // the database is still away: tried again at the next check
            else if (!again.taken) onLost(key, again.holder);
          }
        } finally {
          checking = false;
        }
      }, intervalMs);
      timer.unref();
      return () => clearInterval(timer);
    },
    async release() {
      if (!reserved) return;
      const connection = reserved;
      reserved = undefined;
      held.clear();
      // A connection that is gone has lost its locks already.
      await connection`select pg_advisory_unlock_all()`.catch(() => {});
      connection.release();
    },
  };
  return locks;
}
