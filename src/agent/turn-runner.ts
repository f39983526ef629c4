import { createHash } from 'node:crypto';
import type postgres from 'postgres';
import type { Logger } from 'pino';
import type { Connector } from '#src/connector.ts';
import { isPersonaPerson, type Persona } from '#src/config/persona.ts';
import type { Database } from '#src/db/client.ts';
import { databaseUnavailable, waitForDatabase } from '#src/db/unavailable.ts';
import { claimArrivedMessages, insertMessage, turnSenders } from '#src/db/messages.ts';
import { TurnGone } from '#src/db/outbound-messages.ts';
import { finishTurn, isTurnCancelRequested } from '#src/db/turns.ts';
import type { ChatMessage, ModelClient } from '#src/llm/types.ts';
import type { Questions } from '#src/questions/service.ts';
import type { ToolCatalog } from '#src/tools/catalog.ts';
import type { ToolRunner } from '#src/tools/runner.ts';
import type { SchedulingApi } from '#src/tools/types.ts';
import type { Delivery } from './delivery.ts';
import { DEFAULT_HISTORY_BUDGET, type HistoryBudget } from './history.ts';
import type { SummaryRequest } from './history-window.ts';
import { cronName, loadTurnHistory } from './turn-setup.ts';
import { runAgentLoop, type LoopResult } from './loop.ts';
import type { ReplyStream } from './reply-stream.ts';
import { createTurnOutput } from './turn-output.ts';
import { answeredBeforeCrash, rerunInterruptedCalls } from './resume.ts';
import { stripInternalText } from './visible-text.ts';
import { createTurnStart, JobNotClaimed, type BegunTurn, type StartedTurn, type TurnJob, type TurnOutcome } from './turn-start.ts';
import { turnToolContext } from './turn-context.ts';
import { buildSystemPrompt } from './prompt.ts';
import { answersInText, type Origin, type TurnKind } from '#src/turns.ts';
import type { Subagents } from '#src/subagents/service.ts';
import type { PersonaMail } from '#src/subagents/persona-mail.ts';
import type { UserModelEntry } from '#src/memory/store.ts';

export { JobNotClaimed, type BegunTurn, type TurnJob, type TurnOutcome } from './turn-start.ts';

export interface TurnRunnerDeps {
  database: Database;
  personas: () => readonly Persona[];
  model: ModelClient;
  defaultModel: string;
  tools: ToolRunner;
  /** Which tools each turn sees (built-ins, custom tools, MCP servers' tools), in their tiers. */
  catalog: ToolCatalog;
  delivery: Delivery;
  /** Connectors running in this process (typing indicators need one). */
  connectors: ReadonlyMap<string, Connector>;
  /**
   * Awaited before a streamed reply writes to its chat (see ProcessBeat.beforeAct), the one write of a turn to a
   * platform (beside "typing…") that no write to the database comes before.
   */
  beforeAct?: () => Promise<void>;
  knownConnectors: () => string[];
  timezone: string;
  log: Logger;
  history?: HistoryBudget;
  turnTimeoutMs?: number;
  /** Questions and remote methods; tools that ask a person fail clearly without it. */
  questions?: Pick<Questions, 'remoteMethod' | 'ask'>;
  /** Wake-ups, reminders and schedules for the tools. */
  scheduler?: { forTurn(scope: { persona: Persona; conversationId: string; origin?: Origin }): SchedulingApi };
  /** Where the model's requests go, for the log of a failed call. */
  modelUrl?: string;
  /** Resolves once the files of the messages this turn reads are saved (or given up on), so the model sees them. */
  awaitDownloads?: (conversationId: string, turnId: string, signal: AbortSignal) => Promise<void>;
  /** Background tasks: started by the tools, and told when a task's own turn ends. */
  subagents?: Subagents;
  /** Messages between personas: sent by the tools, and told when a message's turn ends with its reply. */
  personaMail?: PersonaMail;
  /** What the persona knows of a person (`connector:user id`), for the system prompt of turns with them. */
  userModel?: (persona: string, user: string) => Promise<UserModelEntry[]>;
  /** Asks for what leaves the history window to be summarised; without it the window moves on without a summary. */
  summaries?: SummaryRequest;
  /** How long a turn runs before "typing…" is shown (default 250 ms). */
  typingAfterMs?: number;
}

/** What a turn said that is stored as it is delivered: its answer, held until conclude writes it. */
interface Said {
  answer?: ChatMessage;
}

/** Thrown when a turn was interrupted by shutdown: the job is released and retried, not recorded as failed. */
export class TurnInterrupted extends Error {
  override name = 'TurnInterrupted';
}

/** The database went away during a turn's run (a restart, a dropped connection): the run stops where it is. */
class DatabaseAway extends Error {
  override name = 'DatabaseAway';
}

/**
 * How long a turn whose database went away waits for it to answer again before giving its job back to the queue:
 * less than the job's heartbeat (30 s), so the queue never takes the job from a process still waiting with it.
 */
const DATABASE_WAIT_MS = 20_000;
/** How many times one job's turn runs in its process when its database keeps going away. */
const DATABASE_RUNS = 5;

const SHUTDOWN = 'shutdown';

export interface TurnRunner {
  run(job: TurnJob): Promise<TurnOutcome | void>;
  /** Stops a turn running in this process; false when it runs elsewhere or not at all. */
  cancel(turnId: string): boolean;
  /** Interrupts every running turn, and any that starts from now on, so their jobs are retried (shutdown). */
  interruptAll(): void;
  /** Interrupts these turns so their jobs are retried (turns waiting on a person, at shutdown). */
  interrupt(turnIds: Iterable<string>): void;
  /**
   * A user turn's start, taking its job from the queue while messages wait, as a statement on `client` (issued right
   * behind the transaction that stores its message, so that the turn begins in the same round trip). Run the job with
   * `begun` set to what it answers.
   */
  beginIn(job: TurnJob, client: postgres.Sql): Promise<BegunTurn>;
}

export function createTurnRunner(deps: TurnRunnerDeps): TurnRunner {
  const active = new Map<string, AbortController>();
  /** Stop requests for turns not (yet) registered here: a turn checks this when it registers. */
  const early = new Set<string>();
  let stopping = false;
  const { db } = deps.database;
  // A turn's start, transcript and end: rewritten by a rerun if a crash of Postgres loses them (see `bookkeeping`).
  const bookkeeping = deps.database.bookkeeping;
  const { replyStreamFor, conclude, deliverTo, warnPrimary, startTyping } = createTurnOutput(deps);
  const { begin, beginIn, userModelInStart } = createTurnStart(deps, (turnId) => active.has(turnId));

  async function run(job: TurnJob): Promise<TurnOutcome | void> {
    const { data } = job;
    const log = deps.log.child({ conversation: data.conversationId, kind: data.kind });
    const persona = deps.personas().find((p) => p.name === data.persona);
    if (!persona) {
      // Dropped by a process that fetched it (or whose start took it already), so that its job is completed.
      const taken = job.begun ? (await job.begun.catch(() => undefined))?.start.jobClaimed : job.claim?.taken;
      if (job.claim && !taken) throw new JobNotClaimed(`persona ${data.persona} is unknown`);
      log.error({ persona: data.persona }, 'turn for an unknown persona dropped');
      return;
    }
    // The database went away for a moment (a restart): once it answers again the turn carries on where it stopped,
    // here and under the same job, instead of ending with an apology and the person's message unanswered. Giving the
    // job back to its queue at once would need the database too: while it is away that fails, and the job would wait
    // for its heartbeat to run out (half a minute and more) before anyone ran it again.
    // An answer a run had and could not store (the database went away) is the next run's answer: no second model call.
    const said: Said = {};
    for (let again = !!job.retryCount, runs = 1; ; again = true, runs++) {
      try {
        return await runOnce(job, persona, again, log, said);
      } catch (err) {
        if (!(err instanceof DatabaseAway)) throw err;
        log.warn({ err: err.message }, 'the database went away during the turn; it carries on when it is back');
        // A database that keeps going away: the job goes back to its queue, which waits longer between tries.
        const back = runs < DATABASE_RUNS && (await waitForDatabase(deps.database.sql, { withinMs: DATABASE_WAIT_MS, stop: () => stopping || !!job.signal?.aborted }));
        if (!back) throw new TurnInterrupted('the database was away');
      }
    }
  }

  async function runOnce(job: TurnJob, persona: Persona, again: boolean, log: Logger, said: Said): Promise<TurnOutcome | void> {
    const { data } = job;
    // Whom the turn acts for is known from its job (unless a group's outsider is read): a user turn's start reads their
    // model in its statement; another turn's (or one run again) is read beside it.
    const sender = data.origin?.sender;
    const inStart = userModelInStart(data, again);
    const readBeside = inStart !== undefined ? undefined : userModelFor(persona, data.kind, sender, log);
    const started = await begin(job, persona, again, inStart).catch((err: unknown) => {
      throw databaseUnavailable(err) ? new DatabaseAway(err instanceof Error ? err.message : String(err)) : err;
    });
    if (!started) return;
    const userModelRead = readBeside ?? Promise.resolve(started.userModel && sender !== undefined ? { user: sender, entries: started.userModel } : undefined);
    const { turnId } = started;
    const turnLog = log.child({ turn: turnId });
    let stream: ReplyStream | undefined;
    const controller = new AbortController();
    active.set(turnId, controller);
    if (stopping) controller.abort(SHUTDOWN);
    // pg-boss aborts a job's signal when it takes the job back (expired, or stopping): release the turn.
    job.signal?.addEventListener('abort', () => controller.abort(SHUTDOWN), { once: true });
    // A growing answer on screen is its own sign of work.
    const stopTyping = startTyping(data.origin, data.kind, () => stream?.shown() ?? false);
    try {
      // A /stop may have come between the turn's commit and now (or, for a resumed turn, before the restart).
      if (early.delete(turnId) || (started.resumed && (await isTurnCancelRequested(db, turnId)))) controller.abort('stop');
      stream = await replyStreamFor(persona, data, started.replyTo, turnId, turnLog);
      const result = await execute(job, persona, started, controller.signal, turnLog, said, userModelRead, stream);
      if (result.status === 'cancelled' && controller.signal.reason === SHUTDOWN) {
        // The job goes back to its queue (keeping its place) and the turn continues where it stopped; a draft shown
        // so far is finished as it is, never left growing.
        await stream?.finish(undefined, ' …').catch(() => {});
        turnLog.info('turn released; it continues at the next start');
        throw new TurnInterrupted('interrupted by shutdown');
      }
      return await conclude(job, persona, turnId, result, started.replyTo, turnLog, stream, said.answer);
    } catch (err) {
      if (err instanceof TurnInterrupted) throw err;
      if (databaseUnavailable(err)) throw new DatabaseAway(err instanceof Error ? err.message : String(err));
      if (err instanceof TurnGone) {
        // The database lost the turn's start: it begins again, reading what it read, and answers once.
        said.answer = undefined;
        throw new DatabaseAway(err.message);
      }
      turnLog.error({ err }, 'turn crashed');
      await finishTurn(bookkeeping, turnId, { status: 'failed', inputTokens: 0, outputTokens: 0, modelCalls: 0, error: String(err) }).catch(() => {});
      const sorry = 'Sorry, something went wrong on my side and I could not finish that. Please try again.';
      if (stream?.shown()) {
        await stream.finish(sorry).catch(() => {});
      } else if (data.kind === 'user' && data.origin) {
        await deliverTo(data.origin, turnId, 'reply', sorry, data.conversationId, { replyTo: started.replyTo }).catch(() => {});
      } else if (data.kind !== 'user') {
        await warnPrimary(persona, data, turnId, 'an internal error').catch(() => {});
      }
    } finally {
      stopTyping();
      active.delete(turnId);
    }
  }

  async function execute(
    job: TurnJob,
    persona: Persona,
    started: StartedTurn,
    signal: AbortSignal,
    log: Logger,
    said: Said,
    userModelRead: ReturnType<typeof userModelFor>,
    stream?: ReplyStream,
  ): Promise<LoopResult> {
    const { data } = job;
    // A user turn's answer sent as a message of its own is stored with its ledger row (see conclude), not here.
    const holdAnswer = data.kind === 'user' && !!data.origin && !stream && answersInText(data.kind, data.origin);
    const { turnId, conversation } = started;
    if (started.files) await deps.awaitDownloads?.(data.conversationId, turnId, signal);
    const history = await loadTurnHistory(
      { db, summaries: deps.summaries, log },
      persona,
      data.conversationId,
      conversation.historyAfterId,
      deps.history ?? DEFAULT_HISTORY_BUDGET,
      started.history,
    );
    let answered: string | undefined;
    if (started.resumed && answersInText(data.kind, data.origin)) {
      answered = answeredBeforeCrash(history);
      // In the transcript already; else the answer an earlier run in this process held, still to be stored.
      if (answered !== undefined) said.answer = undefined;
      else answered = said.answer?.content;
    }
    if (answered !== undefined) {
      log.info('the turn had answered before the restart; that answer is sent');
      return { status: 'ok', reply: stripInternalText(answered), usage: { input: 0, output: 0 }, modelCalls: 0 };
    }
    // A task works with a fresh context and without the persona's secrets, on the tools it was given.
    const task = data.kind === 'task' ? await deps.subagents?.task(data.conversationId) : undefined;
    // Cancelled (or ended) before its turn began: it does nothing.
    if (task && task.status !== 'running') return { status: 'cancelled', usage: { input: 0, output: 0 }, modelCalls: 0 };
    // The tools are the persona's own (its MCP servers keep their connections), and its secrets are still masked in
    // what they return, though the task's tools cannot use them.
    const owner = persona;
    if (data.kind === 'task') persona = { ...persona, secrets: {} };
    const turnTools = await deps.catalog.forTurn({ persona: owner, kind: data.kind, task, active: conversation.activeTools });
    // The turn acts with the authority of the least trusted person it has read: in a group, a message from someone
    // who is not one of the persona's people, read mid-turn or queued with the first, makes it act as them.
    let origin = data.origin;
    const actAsReaders = async () => {
      if (data.kind !== 'user' || data.origin?.chatType !== 'group' || data.origin.trusted) return;
      const outsider = (await turnSenders(db, turnId)).find((sender) => !isPersonaPerson(persona, sender));
      if (outsider && isPersonaPerson(persona, origin?.sender)) origin = { ...data.origin, sender: outsider };
    };
    await actAsReaders();
    const ctx = turnToolContext(deps, {
      data,
      turnId,
      persona,
      owner,
      origin: () => origin,
      signal,
      log,
      tools: turnTools,
      deliver: (target, text, options) =>
        deliverTo(target, turnId, options?.dedupe ?? `send:${target.connector}:${target.chat}:${hash(text + (options?.files ?? []).join('\n'))}`, text, data.conversationId, {
          replyTo: target.replyTo,
          files: options?.files,
        }),
    });
    const system = buildSystemPrompt({
      persona,
      kind: data.kind,
      conversationId: data.conversationId,
      origin: data.origin,
      timezone: deps.timezone,
      scheduleName: cronName(data.conversationId),
      toolNames: turnTools.callable().map((t) => t.name),
      moreTools: turnTools.listed(),
      userModel: origin?.sender === data.origin?.sender ? await userModelRead : await userModelFor(persona, data.kind, origin?.sender, log),
    });
    if (started.resumed) {
      await rerunInterruptedCalls(history, {
        tools: deps.tools,
        offered: turnTools.callable(),
        ctx,
        store: (message) => insertMessage(bookkeeping, { conversationId: data.conversationId, turnId, message }).then(() => undefined),
        log,
      });
    }
    const timeoutMs =
      data.kind === 'task' ? persona.tools.subagents.timeoutSeconds * 1000 : (persona.tools.turnTimeoutSeconds ?? 0) * 1000 || deps.turnTimeoutMs || 15 * 60_000;
    return runAgentLoop({
      model: deps.model,
      modelName: persona.tools.model ?? deps.defaultModel,
      system,
      messages: history,
      // Read before every model call: a tool activated in this step is callable in the next.
      tools: {
        get specs() {
          return deps.tools.specs(turnTools.callable());
        },
        get list() {
          return turnTools.callable();
        },
        execute: async (call) =>
          turnTools.inactive(call.name)
            ? { content: `not_active: ${call.name} is not active yet; call tool_activate with {"name": "${call.name}"}, then call ${call.name} in your next step.` }
            : deps.tools.execute(call, turnTools.callable(), ctx),
      },
      background: !answersInText(data.kind, data.origin),
      thinking: conversation.thinking || persona.tools.thinking,
      maxIterations: data.kind === 'task' ? persona.tools.subagents.maxIterations : persona.tools.maxIterations,
      budget: deps.history ?? DEFAULT_HISTORY_BUDGET,
      deadline: Date.now() + timeoutMs,
      signal,
      drainInbox:
        data.kind === 'user'
          ? async () => {
              await deps.awaitDownloads?.(data.conversationId, turnId, signal);
              const arrived = await claimArrivedMessages(db, data.conversationId, turnId);
              if (arrived.length) await actAsReaders();
              return arrived;
            }
          : undefined,
      onEvent: async (event) => {
        if (event.type === 'message' && !event.fromInbox) {
          const { message } = event;
          if (holdAnswer && message.role === 'assistant' && !message.toolCalls?.length) {
            said.answer = message;
            return;
          }
          await insertMessage(bookkeeping, { conversationId: data.conversationId, turnId, message });
          if (data.kind !== 'user' && message.role === 'assistant' && !message.toolCalls?.length && message.content.trim()) {
            // A weak model's commonest mistake: its answer is text, which a background turn sends nowhere.
            log.info(
              { text: message.content.trim().split('\n')[0].slice(0, 200) },
              `a ${data.kind} turn answered in plain text, which reaches no one; only send_message and reply_to_origin speak`,
            );
          }
        } else if (event.type === 'model_start') {
          stream?.startCall();
        } else if (event.type === 'text_delta') {
          stream?.append(event.delta);
        } else if (event.type === 'model_end') {
          log.debug({ iteration: event.iteration, usage: event.usage, ms: event.ms }, 'model call finished');
        } else if (event.type === 'tool_end') {
          log.info({ tool: event.call.name, ms: event.ms, outcome: event.output.content.split(':')[0].slice(0, 40) }, 'tool finished');
        }
      },
    });
  }

  /**
   * The model of the person the turn acts for (in a group, the sender, or the outsider it acts as): only theirs, and
   * none in a message from another persona. A failed read leaves it out rather than failing the turn.
   */
  async function userModelFor(persona: Persona, kind: TurnKind, user: string | undefined, log: Logger) {
    if (!deps.userModel || !user || kind === 'persona' || kind === 'task') return undefined;
    try {
      return { user, entries: await deps.userModel(persona.name, user) };
    } catch (err) {
      log.warn({ err }, 'the user model could not be read; the turn goes on without it');
      return undefined;
    }
  }

  return {
    run,
    beginIn,
    cancel(turnId) {
      const controller = active.get(turnId);
      if (controller) {
        controller.abort('stop');
        return true;
      }
      early.add(turnId);
      // Bounded: requests for turns that never run here are forgotten.
      setTimeout(() => early.delete(turnId), 60_000).unref();
      return false;
    },
    interrupt(turnIds) {
      for (const id of turnIds) active.get(id)?.abort(SHUTDOWN);
    },
    interruptAll() {
      stopping = true;
      for (const controller of active.values()) controller.abort(SHUTDOWN);
    },
  };
}


function hash(text: string): string {
  return createHash('sha256').update(text).digest('base64url').slice(0, 16);
}
