// Enqueueing a turn job: Parlor writes the job's row itself, as pg-boss's send writes it for the turn queue, so that a
// message and its turn's job can be one statement (written only when the message is).
import type postgres from 'postgres';
import type { TurnJobData } from '#src/turns.ts';
import { QUEUES } from './queues.ts';

/**
 * The statement that writes turn job `id` for `data` (its conversation its key), as pg-boss's send writes a job of
 * the turn queue: the queue's row gives its retries, expiry, retention, heartbeat and policy. Written only where
 * `when` holds (a statement it is part of says so); a job id written already is not written again, and returns no
 * row. test/jobs/turn-jobs.test.ts holds it to pg-boss's own row.
 */
export function insertTurnJob(client: postgres.Sql, id: string, data: TurnJobData, when: postgres.PendingQuery<postgres.Row[]> | boolean = true) {
  return client`
    insert into pgboss.job (
      id, name, data, priority, start_after, created_on, singleton_key, expire_seconds, deletion_seconds, keep_until,
      retry_limit, retry_delay, retry_backoff, retry_delay_max, policy, dead_letter, heartbeat_seconds,
      blocked, blocking, pending_dependencies
    )
    select ${id}::uuid, ${QUEUES.turn}, ${JSON.stringify(data)}::jsonb, 0, pgboss.job_now(), pgboss.job_now(), ${data.conversationId},
      coalesce(q.expire_seconds, 900), coalesce(q.deletion_seconds, 604800),
      pgboss.job_now() + coalesce(q.retention_seconds, 1209600) * interval '1 second',
      coalesce(q.retry_limit, 2), coalesce(q.retry_delay, 0), coalesce(q.retry_backoff, false), q.retry_delay_max, q.policy,
      q.dead_letter, q.heartbeat_seconds, false, false, 0
    from pgboss.queue q where q.name = ${QUEUES.turn} and ${when}
    on conflict do nothing
    returning id`;
}
