import { sql } from 'drizzle-orm';
import type { Queryable } from './client.ts';
import { senderNotices } from './schema.ts';

/** True when the sender has not been told in the last day; records that they are being told now. */
export async function claimSenderNotice(db: Queryable, connector: string, senderId: string): Promise<boolean> {
  const rows = await db
    .insert(senderNotices)
    .values({ connector, senderId })
    .onConflictDoUpdate({
      target: [senderNotices.connector, senderNotices.senderId],
      set: { notifiedAt: sql`now()` },
      setWhere: sql`${senderNotices.notifiedAt} < now() - interval '1 day'`,
    })
    .returning({ senderId: senderNotices.senderId });
  return rows.length > 0;
}
