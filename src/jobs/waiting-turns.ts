import { sql } from 'drizzle-orm';
import type { Queryable } from '#src/db/client.ts';
import type { TurnJobData } from '#src/turns.ts';
import { QUEUES } from './queues.ts';

// Turn jobs still waiting in the queue, as the scheduler sees them (pg-boss's job table: its `data` is the turn's).

/** Whether a turn started by `source` (`reminder:<id>`, `schedule:<persona>/<name>`) is still waiting to run. */
export async function turnStillQueued(tx: Queryable, source: string): Promise<boolean> {
  const rows = await tx.execute(sql`
    select 1 from pgboss.job
    where name = ${QUEUES.turn} and state in ('created', 'retry') and (data->>'source' = ${source} or data->'sources' ? ${source})
    limit 1`);
  return (rows as unknown as unknown[]).length > 0;
}

/**
 * Reminders of one conversation that fall due together wake one turn: a wake turn of that conversation that has not
 * started yet (and delivers to the same place) takes this one's prompt after its own, and its source besides. Whether
 * one did; false leaves the caller to enqueue a turn of its own (in the same transaction, which holds the
 * conversation's lock until it commits). A job a worker is fetching that moment is skipped, never waited for.
 */
export async function joinWaitingWake(tx: Queryable, data: TurnJobData & { prompt: string; source: string }): Promise<boolean> {
  // Firings of one conversation, in any process, take turns until they commit: two side by side would each see no
  // waiting turn (the other's not committed yet), and each enqueue one.
  await tx.execute(sql`select pg_advisory_xact_lock(hashtextextended(${`parlor:wake:${data.conversationId}`}, 0))`);
  // Due by the clock, not by now(): this transaction may have begun before the one it waited for wrote its job.
  const rows = await tx.execute(sql`
    with waiting as (
      select id from pgboss.job
      where name = ${QUEUES.turn} and singleton_key = ${data.conversationId} and state = 'created' and start_after <= clock_timestamp()
        and data->>'kind' = 'wake' and data->>'persona' = ${data.persona}
        and data->'origin' is not distinct from ${data.origin ? JSON.stringify(data.origin) : null}::jsonb
        and data->'deliver' is not distinct from ${data.deliver ? JSON.stringify(data.deliver) : null}::jsonb
      order by created_on desc
      limit 1
      for update skip locked
    )
    update pgboss.job j set data = j.data
      || jsonb_build_object('prompt', (j.data->>'prompt') || ${'\n\n'} || ${data.prompt}::text)
      || jsonb_build_object('sources', coalesce(j.data->'sources', jsonb_build_array(j.data->'source')) || jsonb_build_array(${data.source}::text))
    from waiting
    where j.id = waiting.id and j.name = ${QUEUES.turn} and j.state = 'created'
    returning j.id`);
  return (rows as unknown as unknown[]).length > 0;
}
