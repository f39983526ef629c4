import { createHash } from 'node:crypto';
import { lt } from 'drizzle-orm';
import { clientOf, type Queryable } from './client.ts';
import { inboundEvents } from './schema.ts';

/**
 * The key an event's id is stored under. Platform ids are short; a longer one (from a connector's bug or a forged
 * event) would overflow the primary key's index entry and make the event impossible to record, even as a failure.
 */
export function inboundEventKey(externalId: string): string {
  return externalId.length <= 200 ? externalId : `sha256:${createHash('sha256').update(externalId).digest('hex')}`;
}

/** Records a platform event; false when it was already recorded (a redelivery). */
export async function recordInboundEvent(db: Queryable, connector: string, externalId: string): Promise<boolean> {
  // Every inbound message runs this: written for postgres.js directly (see clientOf).
  const rows = await clientOf(db)`
    insert into inbound_events (connector, external_id) values (${connector}, ${inboundEventKey(externalId)})
    on conflict do nothing returning external_id`;
  return rows.length > 0;
}

export async function pruneInboundEvents(db: Queryable, olderThan: Date): Promise<void> {
  await db.delete(inboundEvents).where(lt(inboundEvents.receivedAt, olderThan));
}
