import { and, eq, lt, sql } from 'drizzle-orm';
import type { Queryable } from './client.ts';
import { inboundEventKey } from './inbound-events.ts';
import { inboundFailures } from './schema.ts';

export type InboundFailureRow = typeof inboundFailures.$inferSelect;

/**
 * Counts one more failure to store an event. The event is dead-lettered on the failure that brings the count to
 * `deadLetterAfter` (and stays so); only then is `raw` kept. Returns the count and whether it is dead-lettered.
 */
export async function recordInboundFailure(
  db: Queryable,
  row: { connector: string; externalId: string; error: string; raw: string; deadLetterAfter: number },
): Promise<{ attempts: number; deadLettered: boolean }> {
  const first = row.deadLetterAfter <= 1;
  const [counted] = await db
    .insert(inboundFailures)
    .values({
      connector: row.connector,
      externalId: inboundEventKey(row.externalId),
      attempts: 1,
      lastError: row.error,
      raw: first ? row.raw : null,
      deadLettered: first,
    })
    .onConflictDoUpdate({
      target: [inboundFailures.connector, inboundFailures.externalId],
      set: {
        attempts: sql`${inboundFailures.attempts} + 1`,
        lastError: row.error,
        lastFailedAt: sql`now()`,
        deadLettered: sql`${inboundFailures.deadLettered} or ${inboundFailures.attempts} + 1 >= ${row.deadLetterAfter}`,
        raw: sql`case when ${inboundFailures.attempts} + 1 >= ${row.deadLetterAfter} then ${row.raw}::text else ${inboundFailures.raw} end`,
      },
    })
    .returning({ attempts: inboundFailures.attempts, deadLettered: inboundFailures.deadLettered });
  return counted;
}

export async function getInboundFailure(db: Queryable, connector: string, externalId: string): Promise<InboundFailureRow | undefined> {
  const [row] = await db
    .select()
    .from(inboundFailures)
    .where(and(eq(inboundFailures.connector, connector), eq(inboundFailures.externalId, inboundEventKey(externalId))));
  return row;
}

/** Failures that never became dead letters (the event was stored on a later try) are forgotten after a while. */
export async function pruneInboundFailures(db: Queryable, olderThan: Date): Promise<void> {
  await db.delete(inboundFailures).where(and(eq(inboundFailures.deadLettered, false), lt(inboundFailures.lastFailedAt, olderThan)));
}
