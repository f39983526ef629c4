import type { Logger } from 'pino';
import { connectorForChat, type Connector } from '#src/connector.ts';
import type { Persona } from '#src/config/persona.ts';
import { deleteTurnMessages, insertMessage } from '#src/db/messages.ts';
import type { ChatMessage } from '#src/llm/types.ts';
import { outboundRowByKey, recordSentOutbound, type OutboundDraft, type OutboundRow } from '#src/db/outbound-messages.ts';
import { finishTurn, type TurnEnd } from '#src/db/turns.ts';
import { primaryTarget } from '#src/tools/targets.ts';
import { backgroundFailureWarning, type DeliveryTarget, type Origin, type TurnJobData, type TurnKind } from '#src/turns.ts';
import type { LoopResult } from './loop.ts';
import { createReplyStream, type ReplyStream } from './reply-stream.ts';
import type { TurnJob, TurnOutcome, TurnRunnerDeps } from './turn-runner.ts';

const TYPING_REFRESH_MS = 4000;
const TYPING_AFTER_MS = 250;

export type TurnOutputDeps = Pick<TurnRunnerDeps, 'database' | 'connectors' | 'delivery' | 'log' | 'modelUrl' | 'subagents' | 'personaMail' | 'typingAfterMs' | 'beforeAct'>;

/**
 * What a turn says, and to whom: its answer streamed into a draft or sent through the ledger (or handed to the
 * persona or task that asked), "typing…" while it works, and the warning a failed background turn leaves in the
 * persona's primary chat. Its end is recorded here too, after what it said.
 */
export function createTurnOutput(deps: TurnOutputDeps) {
  const { db } = deps.database;
  const bookkeeping = deps.database.bookkeeping;

  /**
   * A user turn's answer streams into one message when the persona asks for it and the chat's connector can draft.
   * The draft's message is noted in the ledger when it first shows: a run of the turn after a crash writes on in it.
   */
  async function replyStreamFor(persona: Persona, data: TurnJobData, replyTo: string | undefined, turnId: string, log: Logger): Promise<ReplyStream | undefined> {
    if (!persona.tools.stream || data.kind !== 'user' || !data.origin) return undefined;
    const { origin } = data;
    const connector = connectorForChat(deps.connectors, origin.connector, origin.chat);
    if (!connector?.draft || !connector.capabilities.edits) return undefined;
    const key = `turn:${turnId}:draft`;
    const earlier = await outboundRowByKey(db, key);
    const resume = Array.isArray(earlier?.platformMessageIds) ? (earlier.platformMessageIds as string[])[0] : undefined;
    return createReplyStream(connector as Required<Pick<Connector, 'draft'>>, {
      chat: origin.chat,
      thread: origin.thread,
      replyTo,
      resume,
      onShown: (messageId) =>
        void recordSentOutbound(db, {
          dedupeKey: key,
          kind: 'draft',
          turnId,
          conversationId: data.conversationId,
          connector: origin.connector,
          chat: origin.chat,
          thread: origin.thread,
          text: '',
          platformMessageIds: [messageId],
        }).catch((err: unknown) => log.warn({ err }, 'the draft message could not be noted')),
    }, deps.beforeAct);
  }

  /**
   * Delivers what the turn says and records its end. `answer`: the turn's last message, when it is its answer and not
   * stored yet: written with the reply's ledger row, else on its own. Says whether the turn's job was completed with
   * the reply's sent mark (else the workers complete it).
   */
  async function conclude(
    job: TurnJob,
    persona: Persona,
    turnId: string,
    result: LoopResult,
    replyTo: string | undefined,
    log: Logger,
    stream?: ReplyStream,
    answer?: ChatMessage,
  ): Promise<TurnOutcome> {
    const { data } = job;
    let answerStored = false;
    let ended = false;
    let jobCompleted = false;
    if (data.kind === 'persona') {
      // A message from another persona: the answer is its reply, for the sender (waiting for it, or in its inbox).
      await deps.personaMail?.answered(data, result.reply);
    } else if (data.kind === 'task') {
      // A task's answer is its result, for the conversation that started it; it is never sent to a chat. Recorded
      // before the turn is: a crash in between reruns this, and the result is recorded (and pushed) once.
      await deps.subagents?.finished(data, { status: result.status, reply: result.reply ?? result.summary, error: result.error });
    } else if (stream?.shown() && data.origin) {
      // The draft becomes the reply: edited to the final text, never sent a second time as a new message.
      const sent = await stream.finish(result.reply, result.status === 'cancelled' ? ' — stopped' : '').catch((err: unknown) => {
        log.warn({ err }, 'the streamed reply could not be finished');
        return undefined;
      });
      if (sent && result.reply) {
        await recordSentOutbound(db, {
          dedupeKey: `turn:${turnId}:reply`,
          turnId,
          conversationId: data.conversationId,
          connector: data.origin.connector,
          chat: data.origin.chat,
          thread: data.origin.thread,
          replyTo,
          text: result.reply,
          platformMessageIds: sent.ids,
        });
      } else if (!sent && result.reply) {
        // The draft could not take it: the reply goes out as a message of its own.
        await deliverTo(data.origin, turnId, 'reply', result.reply, data.conversationId, { replyTo });
      }
    } else if (result.reply && data.origin) {
      // A user turn's reply is its last word: its end is recorded with the reply's sent mark.
      const endsTurn = data.kind === 'user' ? { ...turnEnd(result), job: { id: job.id, retryCount: job.retryCount ?? 0 } } : undefined;
      const delivered = await deliverTo(data.origin, turnId, 'reply', result.reply, data.conversationId, { replyTo, transcript: answer, endsTurn });
      // The ledger row held it unless the row was there before (a rerun's), whose first writing held it then.
      answerStored = true;
      ended = delivered.turnEnded === true;
      jobCompleted = delivered.jobCompleted === true;
      if (delivered.status === 'failed') result = { ...result, error: `reply not delivered: ${delivered.error}` };
    }
    if (answer && !answerStored) await insertMessage(bookkeeping, { conversationId: data.conversationId, turnId, message: answer });
    if (result.status === 'skipped' && data.kind !== 'user') await deleteTurnMessages(db, turnId);
    // Warned before the turn is recorded as finished: a crash in between reruns this, and the ledger sends it once.
    // A failed task is reported to its parent with the batch's results instead.
    if (result.status === 'failed' && data.kind !== 'user' && data.kind !== 'task') await warnPrimary(persona, data, turnId, result.reason ?? result.error);
    if (!ended) await finishTurn(bookkeeping, turnId, turnEnd(result));
    if (result.modelError) {
      // The one line that says why a user got an apology: the endpoint, what it answered and what it said.
      log.warn({ url: deps.modelUrl, status: result.modelError.status, kind: result.modelError.kind, error: result.modelError.message }, 'the model call failed; the turn ends without an answer');
    }
    log.info({ status: result.status, modelCalls: result.modelCalls, tokens: result.usage }, 'turn finished');
    return { jobCompleted };
  }

  /** A background turn that fails says so in the persona's primary chat, never silently. */
  async function warnPrimary(persona: Persona, data: TurnJobData, turnId: string, error: string | undefined) {
    const primary = primaryTarget(persona);
    if (!primary) {
      deps.log.warn({ persona: persona.name, kind: data.kind, error }, 'a background turn failed, and no primary chat is set to say so');
      return;
    }
    await deliverTo(
      primary,
      turnId,
      'failure-warning',
      backgroundFailureWarning(persona.name, data.kind, error),
      data.conversationId,
    );
  }

  /** Every message a turn sends goes through the ledger under a key of this turn, so a rerun never repeats it. */
  function deliverTo(
    target: Origin | DeliveryTarget,
    turnId: string,
    key: string,
    text: string,
    conversationId: string,
    extra: { replyTo?: string; files?: string[]; transcript?: ChatMessage; endsTurn?: TurnEnd } = {},
  ) {
    return deps.delivery.deliver({
      dedupeKey: `turn:${turnId}:${key}`,
      turnId,
      conversationId,
      connector: target.connector,
      chat: target.chat,
      thread: target.thread,
      replyTo: extra.replyTo,
      text,
      files: extra.files,
      ...(extra.transcript ? { transcript: extra.transcript } : {}),
      ...(extra.endsTurn ? { endsTurn: extra.endsTurn } : {}),
    });
  }

  /** "typing…" while a user turn works, through the process that runs the chat's connector when it is not this one. */
  function startTyping(origin: Origin | undefined, kind: TurnKind, answerShown: () => boolean): () => void {
    // A task's parent chat sees work is under way too.
    if (!origin || (kind !== 'user' && kind !== 'task')) return () => {};
    const connector = deps.connectors.get(origin.connector);
    if (connector && (!connector.typing || !connector.capabilities.typing)) return () => {};
    const tick = () => {
      if (!answerShown()) void deps.delivery.typing({ connector: origin.connector, chat: origin.chat, thread: origin.thread }).catch(() => {});
    };
    // Shown once the turn has taken a noticeable moment (as chat platforms advise for their typing indicators): an
    // answer that comes at once needs none, and the platform is asked nothing.
    let refresh: NodeJS.Timeout | undefined;
    const first = setTimeout(() => {
      tick();
      refresh = setInterval(tick, TYPING_REFRESH_MS);
    }, deps.typingAfterMs ?? TYPING_AFTER_MS);
    return () => {
      clearTimeout(first);
      clearInterval(refresh);
    };
  }

  return { replyStreamFor, conclude, deliverTo, warnPrimary, startTyping };
}

/** A turn's record of how it ended. */
function turnEnd(result: LoopResult): TurnEnd {
  return {
    status: result.status,
    inputTokens: result.usage.input,
    outputTokens: result.usage.output,
    cacheReadTokens: result.usage.cacheRead ?? 0,
    cacheWriteTokens: result.usage.cacheWrite ?? 0,
    modelCalls: result.modelCalls,
    summary: result.summary,
    error: result.error,
  };
}

/** A ledger row as the request that wrote it, to deliver it again. */
export function draftOf(row: OutboundRow): OutboundDraft {
  return {
    dedupeKey: row.dedupeKey,
    turnId: row.turnId ?? undefined,
    conversationId: row.conversationId ?? undefined,
    connector: row.connector,
    chat: row.chat,
    thread: row.thread ?? undefined,
    replyTo: row.replyTo ?? undefined,
    text: row.text,
    files: row.files ?? undefined,
    buttons: row.buttons ?? undefined,
  };
}

