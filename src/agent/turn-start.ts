// The start of a turn: its job's turn begun (a user turn's messages claimed in one statement, a background turn's
// prompt written), or, for a job run again, the turn it had found and resumed, or settled when it had answered.
import { randomUUID } from 'node:crypto';
import type postgres from 'postgres';
import type { Persona } from '#src/config/persona.ts';
import { getConversation, ensureConversation } from '#src/db/conversations.ts';
import { insertMessage, type HistoryRead } from '#src/db/messages.ts';
import { outboundForTurn } from '#src/db/outbound-messages.ts';
import { claimTurnOfJob, finishTurn, insertTurn, startUserTurn, turnRunningIn } from '#src/db/turns.ts';
import type { UserModelEntry } from '#src/memory/store.ts';
import type { TurnJobData } from '#src/turns.ts';
import { DEFAULT_HISTORY_BUDGET } from './history.ts';
import { historyReadLimit } from './history-window.ts';
import { draftOf } from './turn-output.ts';
import type { TurnRunnerDeps } from './turn-runner.ts';
import { backgroundPrompt } from './turn-setup.ts';

export interface TurnJob {
  id: string;
  data: TurnJobData;
  /** 0 on the first delivery; more when the job is retried (after a crash or a shutdown). */
  retryCount?: number;
  signal?: AbortSignal;
  /**
   * Not fetched from the queue: this process stored it a moment ago, and the turn's start takes it from the queue in
   * its own statement (one round trip fewer). `taken` turns true once it is this process's; when it cannot be taken
   * (another process has it, or it is not its conversation's next), run() rejects with JobNotClaimed and nothing ran.
   */
  claim?: { taken: boolean };
  /**
   * Begun on its message's connection, right behind the transaction that stored it (see TurnRunner.beginIn): what
   * its start answers. A start that failed is made again as after any failed start (the run is a rerun).
   */
  begun?: Promise<BegunTurn>;
}

/** How a turn run ended, for the workers that ran its job. */
export interface TurnOutcome {
  /** Its job was completed with the turn's end (with the reply's sent mark): the workers need not complete it. */
  jobCompleted: boolean;
}

/** A user turn begun by its message's own transaction: its id and what its start statement answered. */
export interface BegunTurn {
  turnId: string;
  start: Awaited<ReturnType<typeof startUserTurn>>;
}

/** A job whose messages a turn still running read: it goes back to its queue (which holds its conversation's next). */
export class TurnStillRunning extends Error {
  override name = 'TurnStillRunning';
}

/** A job run with `claim` that the turn's start could not take from the queue: nothing was written. */
export class JobNotClaimed extends Error {
  override name = 'JobNotClaimed';
}

export interface ConversationState {
  historyAfterId: number;
  thinking: boolean;
  activeTools: string[];
}

export interface StartedTurn {
  turnId: string;
  replyTo?: string;
  conversation: ConversationState;
  resumed: boolean;
  /** Whether the messages it read first may carry files still being fetched (it waits for them before it reads). */
  files: boolean;
  /** The history, read as the turn began (a turn waiting for files reads it again once they are in). */
  history?: HistoryRead;
  /** The model of the person it acts for, read as it began (`begin`'s `userModelOf`). */
  userModel?: UserModelEntry[];
}

/**
 * Begins the turn of `job`: `begin(job, persona, again, userModelOf)` resolves with the turn to run, or undefined when
 * there is nothing to run (nothing waiting, or a turn run before that has ended or only had its reply to deliver).
 * `beginIn` is a user turn's start alone, for its message's transaction to carry.
 */
/** `runningHere`: whether a turn is running in this process now. */
export function createTurnStart(deps: Pick<TurnRunnerDeps, 'database' | 'delivery' | 'log' | 'history' | 'userModel'>, runningHere: (turnId: string) => boolean) {
  const { db } = deps.database;
  // A turn's start, transcript and end: rewritten by a rerun if a crash of Postgres loses them (see `bookkeeping`).
  const bookkeeping = deps.database.bookkeeping;

  /**
   * A user turn's start statement on `db` (the turn's own connection, or the transaction storing its message), taking
   * its job from the queue when it is run with `claim` not yet taken.
   */
  async function startUser(db: Parameters<typeof startUserTurn>[0], job: TurnJob, userModelOf?: string, behindItsMessage = false): Promise<BegunTurn> {
    const { data } = job;
    const turnId = randomUUID();
    const start = await startUserTurn(
      db,
      {
        id: turnId,
        conversationId: data.conversationId,
        persona: data.persona,
        connector: data.origin?.connector,
        chat: data.origin?.chat,
        thread: data.origin?.thread,
        jobId: job.id,
        // Claimed by this process: were it to die, another gives the job back to the queue at once (see maintenance).
        claimedBy: deps.database.applicationName,
        origin: data.origin,
      },
      // Taken once is enough: a rerun whose start the database lost runs on, and the message's claim keeps it from
      // being answered twice should the job be handed out again meanwhile.
      {
        historyLimit: historyReadLimit(deps.history ?? DEFAULT_HISTORY_BUDGET),
        userModelOf,
        claimJob: !!job.claim && !job.claim.taken ? (behindItsMessage ? 'with messages' : true) : false,
        // On its message's connection, whose commits wait for the disk: this one need not, as on `bookkeeping`.
        relaxedCommit: behindItsMessage,
      },
    );
    return { turnId, start };
  }

  /** `again`: the job ran before (redelivered, or run again after the database was away), so it may have a turn. */
  async function begin(job: TurnJob, persona: Persona, again: boolean, userModelOf?: string): Promise<StartedTurn | undefined> {
    const { data } = job;
    // Claimed by this process: were it to die, another gives the job back to the queue at once (see maintenance).
    const session = deps.database.applicationName;
    const existing = again ? await claimTurnOfJob(db, job.id, session) : undefined;
    // Its turn still runs (here, or in another live process): the job was handed out again meanwhile, and waits for it.
    if (existing === 'held' || (existing?.status === 'running' && runningHere(existing.id))) {
      throw new TurnStillRunning(`the turn of job ${job.id} still runs; its job waits for it`);
    }
    if (existing) {
      // A job its start was to take, found begun: taken by an earlier run of it here.
      if (job.claim) job.claim.taken = true;
      if (existing.status !== 'running') return undefined;
      // The job was redelivered after a crash. A reply in the ledger means the loop had finished: only its delivery
      // may be unfinished (sent, queued, or cut off before the platform answered), and the ledger settles that.
      const reply = (await outboundForTurn(db, existing.id)).find((r) => r.dedupeKey === `turn:${existing.id}:reply`);
      if (reply) {
        const delivered = await deps.delivery.deliver(draftOf(reply));
        await finishTurn(bookkeeping, existing.id, {
          status: 'ok',
          inputTokens: existing.inputTokens,
          outputTokens: existing.outputTokens,
          cacheReadTokens: existing.cacheReadTokens,
          cacheWriteTokens: existing.cacheWriteTokens,
          modelCalls: existing.modelCalls,
          summary: 'completed before a restart',
          error: delivered.status === 'failed' ? `reply not delivered: ${delivered.error}` : undefined,
        });
        return undefined;
      }
      deps.log.info({ conversation: data.conversationId, turn: existing.id }, 'resuming an interrupted turn');
      const conversation = await getConversation(db, data.conversationId);
      return {
        turnId: existing.id,
        replyTo: data.origin?.chatType === 'group' ? data.origin.messageId : undefined,
        conversation: { historyAfterId: conversation?.historyAfterId ?? 0, thinking: conversation?.thinking ?? false, activeTools: conversation?.activeTools ?? [] },
        resumed: true,
        files: data.kind === 'user',
      };
    }
    if (job.claim && data.kind !== 'user') throw new JobNotClaimed(`a ${data.kind} turn's job is fetched from its queue`);
    if (data.kind === 'user') {
      // Begun by its message's transaction: only a run again (the database away since) begins afresh.
      const begun = await (!again && job.begun ? job.begun : startUser(bookkeeping, job, userModelOf));
      const { turnId } = begun;
      const { jobClaimed, conversation, claimed, history, userModel } = begun.start;
      if (jobClaimed === false) throw new JobNotClaimed(`job ${job.id} was not taken`);
      if (job.claim) job.claim.taken = true;
      if (claimed.length === 0) {
        // Nothing waiting: an earlier turn already read this message mid-run. Unless a turn of the conversation still
        // runs: its job was handed out again (a crash of Postgres lost the job's claim after its turn began), and this
        // job waits for it in the queue, or the conversation's next message could be answered before that turn's.
        if (await turnRunningIn(db, data.conversationId)) throw new TurnStillRunning(`a turn of ${data.conversationId} still runs; its job waits for it`);
        return undefined;
      }
      // In a group the answer quotes the message it answers; in a DM it needs no quote.
      const replyTo = data.origin?.chatType === 'group' ? (claimed[claimed.length - 1]?.externalId ?? data.origin.messageId) : undefined;
      const files = claimed.some(({ message }) => message.role === 'user' && !!message.attachments?.length);
      return { turnId, replyTo, conversation, resumed: false, files, userModel, ...(files ? {} : { history }) };
    }
    const turnId = randomUUID();
    return bookkeeping.transaction(async (tx): Promise<StartedTurn> => {
      const conversation = await ensureConversation(tx, {
        id: data.conversationId,
        persona: persona.name,
        connector: data.origin?.connector,
        chat: data.origin?.chat,
        thread: data.origin?.thread,
      });
      await insertTurn(tx, { id: turnId, conversationId: data.conversationId, kind: data.kind, jobId: job.id, claimedBy: session, origin: data.origin });
      await insertMessage(tx, {
        conversationId: data.conversationId,
        turnId,
        message: { role: 'user', content: backgroundPrompt(data.kind, data.prompt) },
      });
      return { turnId, conversation, resumed: false, files: false };
    });
  }

  /** Whom a user turn acts for, when its start reads their model in its statement (its first run only). */
  function userModelInStart(data: TurnJobData, again: boolean): string | undefined {
    const sender = data.origin?.sender;
    return data.kind === 'user' && !again && !!deps.userModel && sender !== undefined ? sender : undefined;
  }

  return {
    begin,
    userModelInStart,
    /** A user turn's start as a statement on `client`, right behind the transaction storing its message (see TurnRunner.beginIn). */
    beginIn: (job: TurnJob, client: postgres.Sql) => startUser(client, job, userModelInStart(job.data, false), true),
  };
}
