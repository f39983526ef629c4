// Whether a process is alive, as the database sees it: every connection of a process carries its session name
// (application_name, see Database.applicationName), which is gone from pg_stat_activity once the process is.
import { sql } from 'drizzle-orm';

/** The session names of live processes: a row owned by a session not in this list lost its process. */
export const LIVE_SESSIONS = sql`(select application_name from pg_stat_activity where application_name is not null)`;

/**
 * What was seen gone at this pass and at the one before: a database blip drops a live process's sessions for a
 * moment, so only a process missing at two passes in a row is taken for dead. `key` names an item across passes.
 */
export function goneAtTwoPasses<T>(key: (item: T) => string = String): (seenNow: readonly T[]) => T[] {
  let before = new Set<string>();
  return (seenNow) => {
    const gone = seenNow.filter((item) => before.has(key(item)));
    before = new Set(seenNow.map(key));
    return gone;
  };
}
