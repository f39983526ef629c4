// Whether a process is alive, as the database sees it: every connection of a process carries its session name
// (application_name, see Database.applicationName), which is gone from pg_stat_activity once the process is. A
// process can also stop without its connections closing (stopped, frozen, its machine cut off): then its heartbeat
// stops (process_beats), the others fence it (its connections terminated, its session marked), and a fenced session
// no longer counts as alive even if the process comes back and connects again.
import { sql } from 'drizzle-orm';
import type postgres from 'postgres';

/** The session names of live processes: a row owned by a session not in this list lost its process. */
export const LIVE_SESSIONS = sql`(select application_name from pg_stat_activity where application_name is not null
  and application_name not in (select session from process_beats where fenced_at is not null))`;

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

/**
 * Records that the session is alive: its first beat adds its row, the later ones renew it. False when it was fenced,
 * or its row is gone (it was away for long enough to be forgotten): either way its work is now others'.
 */
export async function beat(client: postgres.Sql, session: string, first: boolean): Promise<boolean> {
  const rows = first
    ? await client`insert into process_beats (session) values (${session})
        on conflict (session) do update set beat_at = now() where process_beats.fenced_at is null returning 1`
    : await client`update process_beats set beat_at = now() where session = ${session} and fenced_at is null returning 1`;
  return rows.length > 0;
}

/** A session that was fenced, and how many of its connections were terminated. */
export interface Fenced {
  session: string;
  terminated: number;
}

/**
 * Fences the sessions (other than `own`) that have not beaten for `hungAfterSeconds` while connected, with no
 * connection opened since (a process back from a database restart connects anew before it beats again): marked
 * fenced, so they no longer count as alive, and their connections terminated, which ends what they were doing in
 * the database and lets go of their locks.
 */
export async function fenceHungSessions(client: postgres.Sql, own: string, hungAfterSeconds: number): Promise<Fenced[]> {
  const rows = await client<{ session: string; terminated: number }[]>`
    with hung as (
      select b.session from process_beats b
      where b.fenced_at is null and b.session <> ${own} and b.beat_at < now() - make_interval(secs => ${hungAfterSeconds})
        and exists (select 1 from pg_stat_activity a where a.application_name = b.session)
        and not exists (
          select 1 from pg_stat_activity a
          where a.application_name = b.session and a.backend_start > now() - make_interval(secs => ${hungAfterSeconds}))
      for update of b skip locked
    ), fenced as (
      update process_beats b set fenced_at = now() from hung where b.session = hung.session returning b.session
    )
    select f.session, (
      -- In a CASE, so that only its connections are terminated: Postgres may evaluate an AND's terms in any order.
      select count(*) from pg_stat_activity a
      where case when a.application_name = f.session and a.pid <> pg_backend_pid() then pg_terminate_backend(a.pid) else false end
    )::int as terminated
    from fenced f`;
  return rows.map((r) => ({ session: r.session, terminated: r.terminated }));
}

/** Forgets the beats of sessions gone for a day (a process back after that finds its row gone, and stops). */
export async function pruneBeats(client: postgres.Sql): Promise<void> {
  await client`delete from process_beats where beat_at < now() - interval '1 day'
    and session not in (select application_name from pg_stat_activity where application_name is not null)`;
}

/** A process stopping cleanly takes its row away. */
export async function endBeats(client: postgres.Sql, session: string): Promise<void> {
  await client`delete from process_beats where session = ${session}`;
}

/** Whether a session was fenced (checked before a message is taken for sending). */
export const NOT_FENCED = (session: string | null) =>
  sql`not exists (select 1 from process_beats where session = ${session} and fenced_at is not null)`;
