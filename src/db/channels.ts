import { sql } from 'drizzle-orm';
import type postgres from 'postgres';
import type { Queryable } from './client.ts';

/** Every Postgres notification channel Parlor uses, in one place. */
export const CHANNELS = {
  /** A turn job is waiting (payload: turnNotice): a process with a free place fetches it. */
  turn: 'parlor_turn',
  /** A message waits in the outbox for a connector (payload: the connector id). */
  outbox: 'parlor_outbox',
  /** A question was opened or resolved (payload: `pending:<id>` or `done:<id>`). */
  question: 'parlor_question',
  /** A /stop for a turn running in some process (payload: the turn id). */
  cancel: 'parlor_cancel',
  /** Show "typing…" in a chat whose connector runs in another process (payload: JSON connector, chat, thread). */
  typing: 'parlor_typing',
  /** A background command runs in another process: signal it, or stop a conversation's (payload: JSON ProcessRequest). */
  process: 'parlor_process',
  /** A persona answered an ask_persona whose asker waits (payload: the ask's id). */
  personaAsk: 'parlor_persona_ask',
  /** Something falls due at the time in the payload (ISO 8601). */
  timer: 'parlor_timer',
} as const;

export type Channel = (typeof CHANNELS)[keyof typeof CHANNELS];

/** The turn channel's payload: the job's conversation, and the job. */
export function turnNotice(conversationId: string, jobId: string): string {
  return `${conversationId}\n${jobId}`;
}

export function readTurnNotice(payload: string): { conversationId: string; jobId?: string } {
  const cut = payload.lastIndexOf('\n');
  return cut < 0 ? { conversationId: payload } : { conversationId: payload.slice(0, cut), jobId: payload.slice(cut + 1) };
}

/**
 * Notifies every listening process, after the transaction `db` belongs to commits (or at once outside one). `db` is
 * a drizzle handle, or a postgres.js connection (one of inOneTrip's).
 */
export async function notify(db: Queryable | postgres.Sql, channel: Channel, payload = ''): Promise<void> {
  if (typeof db === 'function') await db`select pg_notify(${channel}, ${payload})`;
  else await db.execute(sql`select pg_notify(${channel}, ${payload})`);
}

/** Listens on a channel; `onListen` runs on each (re)connection, so a caller can catch up on what it missed. */
export function listen(pool: postgres.Sql, channel: Channel, onNotify: (payload: string) => void, onListen?: () => void) {
  return pool.listen(channel, onNotify, onListen);
}
