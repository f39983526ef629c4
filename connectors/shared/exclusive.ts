import { createHash } from 'node:crypto';
import type { ExclusiveReceiver } from '#src/connector.ts';

/** The lock a receiver holds for a token: named by a hash of it (the token never reaches the database). */
export function exclusiveReceiver(way: string, token: string, describe: string): ExclusiveReceiver {
  return { key: `${way}:${createHash('sha256').update(token).digest('hex').slice(0, 24)}`, describe };
}
