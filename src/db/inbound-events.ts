import { lt } from 'drizzle-orm';
import type { Queryable } from './client.ts';
import { inboundEvents } from './schema.ts';

/** Records a platform event; false when it was already recorded (a redelivery). */
export async function recordInboundEvent(db: Queryable, connector: string, externalId: string): Promise<boolean> {
  const rows = await db
    .insert(inboundEvents)
    .values({ connector, externalId })
    .onConflictDoNothing()
    .returning({ externalId: inboundEvents.externalId });
  return rows.length > 0;
}

export async function pruneInboundEvents(db: Queryable, olderThan: Date): Promise<void> {
  await db.delete(inboundEvents).where(lt(inboundEvents.receivedAt, olderThan));
}
