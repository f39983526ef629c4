// What only one process may do at a time across a deployment (receive a bot token's long polling, a Discord gateway,
// a Slack socket): a session advisory lock, held on a connection of its own for as long as the process does it.
import type { Database } from './client.ts';

/** The first key of every lock taken here (the second is the hash of the lock's name). */
const NAMESPACE = 721_045;

export interface ExclusiveLocks {
  /** Takes the lock named `key`: true, or false when another process holds it (with that process's name). */
  take(key: string): Promise<{ taken: true } | { taken: false; holder?: string }>;
  /** Releases every lock (the connection goes back to the pool). */
  release(): Promise<void>;
}

export function createExclusiveLocks(database: Pick<Database, 'sql'>): ExclusiveLocks {
  let reserved: Awaited<ReturnType<Database['sql']['reserve']>> | undefined;
  const held = new Set<string>();
  return {
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
          and l.objid = (hashtext(${key})::bigint & 4294967295)::oid and l.granted
        limit 1`;
      return { taken: false, ...(holder?.name ? { holder: `${holder.name}${holder.addr ? ` from ${holder.addr}` : ''}` } : {}) };
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
}
