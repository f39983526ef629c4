import type { Logger } from 'pino';
import type postgres from 'postgres';
import { connectorForChat, type Connector, type SentMessage } from '#src/connector.ts';
import { recordConversationThread } from '#src/db/conversation-threads.ts';
import type { Queryable } from '#src/db/client.ts';
import {
  claimPendingOutbound,
  insertOutbound,
  markOutboundFailed,
  markOutboundSent,
  outboundOrphaned,
  outboundRowByKey,
  releaseOutbound,
  requeueOrphanedOutbound,
  takeOverOutbound,
  waitsBehind,
  type OutboundDraft,
  type OutboundRow,
} from '#src/db/outbound-messages.ts';
import { sleep, withRetries } from '#src/retry.ts';
import { CHANNELS, listen, notify } from '#src/db/channels.ts';
import type { DeliveryResult } from '#src/turns.ts';
import type { TurnEnd } from '#src/db/turns.ts';

/** How long a send's outcome is written again while the database is away before the process gives up on it. */
const RECORD_DEADLINE_MS = 10 * 60_000;

export interface Delivery {
  /**
   * Sends a message through the ledger. With `later`, it is only written to the outbox (sent in the background, by
   * this process when it runs the connector): the caller never waits on the platform (ingress, say).
   */
  deliver(request: OutboundDraft, options?: { later?: boolean }): Promise<DeliveryResult>;
  /**
   * Shows "typing…" in a chat: through its connector when it runs here, else by asking the process that runs it (a
   * hint, never queued: a late one means nothing).
   */
  typing(target: { connector: string; chat: string; thread?: string }): Promise<void>;
  /** Sends what other processes queued for connectors running here, now and whenever notified. */
  startOutbox(): Promise<void>;
  stop(): Promise<void>;
}


/**
 * Outbound messages go through a ledger: written first (so a redelivered job finds its key and sends nothing),
 * then sent by this process when it runs the connector, or by the process that does (terminal chats, say).
 */
export function createDelivery(deps: {
  db: Queryable;
  sql: postgres.Sql;
  /** This process's database session: the ledger records it on the rows it sends. */
  session: string;
  connectors: ReadonlyMap<string, Connector>;
  /** Connectors that run somewhere in this deployment (maybe in another process). */
  knownConnectors: () => string[];
  log: Logger;
  sendDeadlineMs?: number;
  /** How long after seeing a sender gone it is looked for again before its message is taken over. */
  livenessRecheckMs?: number;
  /**
   * Awaited before each attempt at a send and before "typing…" (see ProcessBeat.beforeAct): a process stopped between
   * two tries of a send, and fenced meanwhile (the row is another process's now), tries no more.
   */
  beforeAct?: () => Promise<void>;
}): Delivery {
  const { db, sql, connectors, log } = deps;
  let listener: { unlisten(): Promise<void> } | undefined;
  let typingListener: { unlisten(): Promise<void> } | undefined;
  let sweep: NodeJS.Timeout | undefined;
  let draining: Promise<void> | undefined;

  /** What the row asks of the platform: a message (its parts' ids and the thread it landed in), or a reaction. */
  async function perform(row: OutboundRow, connector: Connector, resend: boolean): Promise<SentMessage> {
    if (row.kind === 'reaction') {
      if (!connector.react || !connector.capabilities.react) throw new Error(`${row.connector} does not support reactions`);
      if (!row.replyTo) throw new Error('a reaction needs the message it is set on');
      await connector.react(row.chat, row.replyTo, row.text, row.thread ?? undefined);
      return { ids: [] };
    }
    return connector.send({
      chat: row.chat,
      thread: row.thread ?? undefined,
      text: row.text,
      replyTo: row.replyTo ?? undefined,
      files: row.files ?? undefined,
      buttons: row.buttons ?? undefined,
      // Only a connector that can show it to them alone is told; elsewhere it goes to the chat, answering their message.
      ...(row.privateTo && connector.capabilities.privateReplies ? { privateTo: row.privateTo } : {}),
      key: `outbound:${row.id}`,
      ...(resend ? { resend } : {}),
    });
  }

  let stopped = false;

  /**
   * What the ledger must hold about a row this process is sending (that the platform has it, or that it failed):
   * written again through a database restart for as long as the process runs. A row left 'sending' by a live
   * process is nobody's to send, and holds its chat's next messages.
   */
  async function record(row: OutboundRow, what: string, write: () => Promise<unknown>): Promise<void> {
    const deadline = Date.now() + RECORD_DEADLINE_MS;
    for (let attempt = 1; ; attempt++) {
      try {
        await write();
        return;
      } catch (err) {
        if (stopped || Date.now() > deadline) throw err;
        if (attempt === 1) log.warn({ err, connector: row.connector, chat: row.chat, what }, 'the outbox could not record a send; trying again until the database answers');
        await sleep(Math.min(5000, 200 * 2 ** Math.min(attempt - 1, 5)));
      }
    }
  }

  /** `endsTurn`: the turn's end, recorded with the sent mark (the message is the turn's last word). */
  async function send(row: OutboundRow, connector: Connector, endsTurn?: TurnEnd): Promise<DeliveryResult> {
    let attempts = 0;
    // The persona's thread from now on: known before the message goes out, so an answer typed there at once counts.
    const threadKnown = Boolean(row.thread && row.conversationId && row.kind !== 'reaction' && connector.capabilities.ownsReplyThreads);
    if (threadKnown) {
      await record(row, 'the thread', () => recordConversationThread(db, { connector: row.connector, chat: row.chat, thread: row.thread!, conversationId: row.conversationId! }));
    }
    let sent: SentMessage;
    try {
      sent = await withRetries(
        async () => {
          await deps.beforeAct?.();
          attempts++;
          // A retry, or a row taken over from a process that died sending it: the platform may have it already.
          return perform(row, connector, attempts > 1 || row.resends > 0);
        },
        {
          deadlineMs: deps.sendDeadlineMs ?? 120_000,
          onRetry: (err, attempt, delayMs) =>
            log.warn({ err, connector: row.connector, chat: row.chat, attempt, delayMs }, 'send failed; retrying'),
        },
      );
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      log.error({ err, connector: row.connector, chat: row.chat, conversation: row.conversationId }, row.kind === 'reaction' ? 'reaction could not be set' : 'message could not be delivered');
      await record(row, 'the failure', () => markOutboundFailed(db, row.id, message, attempts));
      return { status: 'failed', error: message };
    }
    // The thread the reply landed in is the persona's: what people post in it continues the reply's conversation
    // (without a new mention), whether the connector opened it for the reply or the conversation began in it.
    const thread =
      sent.thread && row.conversationId && !(threadKnown && sent.thread === row.thread)
        ? { connector: row.connector, chat: row.chat, thread: sent.thread, conversationId: row.conversationId }
        : undefined;
    // The platform has it: recorded whatever it takes, or another process would send it again.
    let jobCompleted = false;
    await record(row, 'the send', async () => ({ jobCompleted } = await markOutboundSent(db, row.id, sent.ids, attempts, endsTurn, thread)));
    return {
      status: 'sent',
      ids: sent.ids,
      ...(sent.thread ? { thread: sent.thread } : {}),
      ...(endsTurn ? { turnEnded: true } : {}),
      ...(jobCompleted ? { jobCompleted } : {}),
    };
  }

  async function drain(): Promise<void> {
    const served = [...connectors.values()].map((c) => ({ connector: c.id, chats: c.chats }));
    while (!stopped) {
      const rows = await claimPendingOutbound(db, served, deps.session);
      if (rows.length === 0) return;
      // Chats side by side, each in order: one chat held by its platform's rate limit does not hold the others.
      const byChat = new Map<string, OutboundRow[]>();
      for (const row of rows) byChat.set(`${row.connector}\u0000${row.chat}`, [...(byChat.get(`${row.connector}\u0000${row.chat}`) ?? []), row]);
      await Promise.all(
        [...byChat.values()].map(async (chatRows) => {
          for (const row of chatRows) await send(row, connectors.get(row.connector)!);
        }),
      );
    }
  }

  function scheduleDrain() {
    draining ??= drain()
      .catch((err) => log.error({ err }, 'outbox drain failed'))
      .finally(() => (draining = undefined));
  }

  /**
   * The key exists: what became of the message decides. Sent: a duplicate. Pending: sent here when this process
   * runs its connector, else queued. Being sent by a live process: waited for. Left 'sending' by a process that died
   * before the platform answered: never counted as delivered, but taken over and sent again, once.
   */
  async function settleExisting(request: OutboundDraft, connector: Connector | undefined): Promise<DeliveryResult> {
    const deadline = Date.now() + (deps.sendDeadlineMs ?? 120_000) + 30_000;
    for (;;) {
      const existing = await outboundRowByKey(db, request.dedupeKey);
      if (!existing) return { status: 'failed', error: 'the message vanished from the ledger while it was being sent' };
      if (existing.status === 'sent') return { status: 'duplicate' };
      if (existing.status === 'failed') return { status: 'failed', error: existing.error ?? 'delivery failed' };
      if (existing.status === 'pending' && !connector) return { status: 'queued' };
      // A sender seen gone twice, a few seconds apart: a database blip drops a live process's sessions for a moment.
      if (existing.status === 'pending' || (await orphanedTwice(existing.id))) {
        // Behind an earlier message of its chat: it goes out after that one, from the outbox, like any other.
        if (await waitsBehind(db, existing)) {
          if (existing.status === 'sending') await requeueOrphanedOutbound(db, [existing.id]);
          if (connector) scheduleDrain();
          return { status: 'queued' };
        }
        const taken = await takeOverOutbound(db, existing.id, deps.session);
        if (taken && connector) {
          if (existing.status === 'sending') log.warn({ connector: taken.connector, chat: taken.chat, key: taken.dedupeKey }, 'sending again a message whose sender stopped before the platform confirmed it');
          return send(taken, connector);
        }
        if (taken) {
          // Not ours to send: back to the outbox of the process that runs its connector.
          await markOutboundPending(taken);
          return { status: 'queued' };
        }
        // Taken by another process meanwhile (or this one was fenced, and may take nothing): read it again.
        await sleep(50);
        continue;
      }
      if (Date.now() > deadline) return { status: 'failed', error: 'another process is still sending this message' };
      await sleep(200);
    }
  }

  /**
   * True only when the row is still 'sending' with its claimer gone now and a moment later. A row that was sent or
   * failed meanwhile is not orphaned: the loop reads it again and settles.
   */
  async function orphanedTwice(id: number): Promise<boolean> {
    if (!(await outboundOrphaned(db, id))) return false;
    await sleep(deps.livenessRecheckMs ?? 3000);
    return outboundOrphaned(db, id);
  }

  async function markOutboundPending(row: OutboundRow) {
    await releaseOutbound(db, row.id, deps.session);
    await notify(db, CHANNELS.outbox, row.connector);
  }

  const localConnector = (id: string, chat: string) => connectorForChat(connectors, id, chat);

  async function showTyping(target: { connector: string; chat: string; thread?: string }) {
    const connector = localConnector(target.connector, target.chat);
    if (!connector?.typing || !connector.capabilities.typing) return;
    // Like a send: a process back from a long stop, fenced meanwhile, shows nothing before it learns so and exits.
    await deps.beforeAct?.();
    await connector.typing(target.chat, target.thread);
  }

  return {
    async typing(target) {
      if (connectors.has(target.connector)) return showTyping(target);
      if (!deps.knownConnectors().includes(target.connector)) return;
      await notify(db, CHANNELS.typing, JSON.stringify({ connector: target.connector, chat: target.chat, thread: target.thread }));
    },
    async deliver(request, options = {}) {
      const local = connectors.get(request.connector);
      const connector = localConnector(request.connector, request.chat);
      if (!local && !deps.knownConnectors().includes(request.connector)) {
        return { status: 'failed', error: `no connector named "${request.connector}" is configured` };
      }
      const now = connector && !options.later;
      const row = await insertOutbound(db, { ...request, status: now ? 'sending' : 'pending', claimedBy: deps.session });
      if (!row) return options.later ? { status: 'queued' } : settleExisting(request, connector);
      // Written as pending when an earlier message of the chat is still open: it goes out after that one.
      if (now && row.status === 'sending') return send(row, connector, request.endsTurn);
      if (connector) scheduleDrain();
      else await notify(db, CHANNELS.outbox, request.connector);
      return { status: 'queued' };
    },
    async startOutbox() {
      if (connectors.size === 0) return;
      listener = await listen(sql, CHANNELS.outbox, (payload) => {
        if (connectors.has(payload)) scheduleDrain();
      });
      typingListener = await listen(sql, CHANNELS.typing, (payload) => {
        let target: { connector?: unknown; chat?: unknown; thread?: unknown };
        try {
          target = JSON.parse(payload) as typeof target;
        } catch {
          return;
        }
        if (typeof target.connector !== 'string' || typeof target.chat !== 'string' || !connectors.has(target.connector)) return;
        void showTyping({ connector: target.connector, chat: target.chat, thread: typeof target.thread === 'string' ? target.thread : undefined }).catch(() => {});
      });
      // The notification is a shortcut; the sweep catches anything queued while nobody listened.
      sweep = setInterval(scheduleDrain, 2000);
      sweep.unref();
      scheduleDrain();
    },
    async stop() {
      stopped = true;
      clearInterval(sweep);
      await listener?.unlisten().catch(() => {});
      await typingListener?.unlisten().catch(() => {});
      await draining;
    },
  };
}
