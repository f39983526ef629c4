import { createHash } from 'node:crypto';
import { lt } from 'drizzle-orm';
import type postgres from 'postgres';
import type { ChatMessage } from '#src/llm/types.ts';
import { insertTurnJob } from '#src/jobs/turn-jobs.ts';
import type { TurnJobData } from '#src/turns.ts';
import { CHANNELS, turnNotice } from './channels.ts';
import { clientOf, type Queryable } from './client.ts';
import { openInChat } from './questions.ts';
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

export type StoredInbound = 'stored' | 'duplicate' | 'question open';

/**
 * A message for a turn, written in one statement: the event recorded (its first delivery only), the conversation
 * marked active (created if need be), the message stored waiting for a turn with its turn's job, and the turn workers
 * woken (at commit) unless `announce` is false. Nothing else is written unless the message is 'stored'. With
 * `unlessQuestionIn`, nothing is written when a question is open in that chat (the message may be its answer, see the
 * questions module): 'question open'.
 */
export async function storeInboundMessage(
  client: postgres.Sql,
  row: {
    connector: string;
    externalId: string;
    conversation: { id: string; persona: string; chat: string; thread?: string };
    message: ChatMessage;
    sender: string;
    messageId?: string;
    unlessQuestionIn?: { thread?: string; conversationId?: string };
    /** Its turn's job: written with the message (and only then), and named in the notification that wakes the workers. */
    job: { id: string; data: TurnJobData };
    /**
     * false: no notification. This process holds a place for the turn, whose start follows in the same round trip;
     * the workers announce the job if that start cannot take it (see TurnWorkers.hold). Other processes' workers
     * would only look for it in vain.
     */
    announce?: boolean;
  },
): Promise<StoredInbound> {
  const c = row.conversation;
  const guard = row.unlessQuestionIn;
  const [result] = await client<{ question_open: boolean; fresh: boolean }[]>`
    with open_question as (
      select 1 from questions
      where ${guard !== undefined} and ${openInChat(client, { connector: row.connector, chat: c.chat, thread: guard?.thread, conversationId: guard?.conversationId })}
      limit 1
    ), event as (
      insert into inbound_events (connector, external_id)
      select ${row.connector}, ${inboundEventKey(row.externalId)} where not exists (select 1 from open_question)
      on conflict do nothing returning 1
    ), conversation as (
      insert into conversations (id, persona, connector, chat, thread)
      select ${c.id}, ${c.persona}, ${row.connector}, ${c.chat}, ${c.thread ?? null} where exists (select 1 from event)
      on conflict (id) do update set last_activity_at = now()
      returning id
    ), message as (
      insert into messages (conversation_id, turn_id, role, content, sender, external_id)
      select id, null, ${row.message.role}, ${JSON.stringify(row.message)}, ${row.sender}, ${row.messageId ?? null} from conversation
      returning id
    ), job as (${insertTurnJob(client, row.job.id, row.job.data, client`exists (select 1 from message)`)})
    select exists (select 1 from open_question) as question_open, exists (select 1 from event) as fresh,
      (select count(pg_notify(${CHANNELS.turn}, ${turnNotice(c.id, row.job.id)})) from job where ${row.announce !== false}) as notified`;
  if (result.question_open) return 'question open';
  return result.fresh ? 'stored' : 'duplicate';
}
