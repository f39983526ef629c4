// Background tasks a persona starts (spawn_subagent): each a row, then a turn job in a conversation of its own, run
// by whichever worker process is free; their results go back to the conversation that started them, as one wake
// turn per batch (the tasks one turn started), once the last of them has ended. Every step is in Postgres, so a restart loses nothing and pushes nothing twice.
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import type { Persona } from '#src/config/persona.ts';
import { parseConversationId, subagentConversationId } from '#src/conversation-id.ts';
import type { Database, Queryable } from '#src/db/client.ts';
import { conversationActivity } from '#src/db/messages.ts';
import {
  batchFinished,
  claimUnpushed,
  conversationTasks,
  countTurnTasks,
  finishSubagentTask,
  getSubagentTask,
  insertSubagentTask,
  lockPersonaTasks,
  openConversationTasks,
  startQueuedTasks,
  type SubagentStatus,
  type SubagentTaskRow,
} from '#src/db/subagent-tasks.ts';
import type { JobSystem } from '#src/jobs/boss.ts';
import { QUEUES, type SubagentPushJobData } from '#src/jobs/queues.ts';
import type { SubagentsApi, ToolContext } from '#src/tools/types.ts';
import type { Origin, TurnJobData } from '#src/turns.ts';

/** Tools a task never gets: they speak to people, or start more work. */
export const SUBAGENT_EXCLUDED_TOOLS = [
  'send_message',
  'ask_user',
  'react',
  'reply_to_origin',
  'remind',
  'schedule_wakeup',
  'spawn_subagent',
  'send_to_persona',
  'ask_persona',
] as const;

/** How much of a task's final text its parent reads in the wake (the rest stays in the task's conversation). */
export const RESULT_LIMIT = 2000;

/** What ended a task's turn, as the turn runner saw it. */
export interface TaskOutcome {
  status: 'ok' | 'failed' | 'cancelled' | 'skipped';
  reply?: string;
  error?: string;
}

export interface Subagents {
  /** The tools' view, for one turn. */
  forTurn(ctx: Pick<ToolContext, 'persona' | 'conversationId' | 'turnId' | 'kind' | 'origin'>): SubagentsApi;
  /** A task's turn ended: its result is recorded, the next queued task starts, and the batch's wake goes if it was the last. */
  finished(data: TurnJobData, outcome: TaskOutcome): Promise<void>;
  /** Cancels a conversation's tasks (the chat's /stop); resolves with how many. */
  cancelConversation(conversationId: string): Promise<number>;
  /** The task a task conversation belongs to, for its turn (its tool list, its depth). */
  task(conversationId: string): Promise<SubagentTaskRow | undefined>;
  start(): Promise<void>;
  stop(): Promise<void>;
}

export function createSubagents(deps: {
  database: Database;
  jobs: Pick<JobSystem, 'enqueueTurn' | 'send' | 'boss'>;
  personas: () => readonly Persona[];
  /** Stops a conversation's running turn, in whichever process runs it (as /stop does): `stopped` when one was. */
  stopConversation(conversationId: string): Promise<unknown>;
  log: Logger;
  /** Run the wake worker here (processes that take turns). */
  worker?: boolean;
}): Subagents {
  const { db } = deps.database;
  const log = deps.log.child({ module: 'subagents' });
  let workerId: string | undefined;

  /** Starts what the persona's limit allows, in the transaction that freed a place (or queued the task). */
  async function dispatch(tx: Queryable, persona: Persona) {
    for (const row of await startQueuedTasks(tx, persona.name, persona.tools.subagents.running)) {
      await deps.jobs.enqueueTurn(
        {
          conversationId: subagentConversationId(persona.name, row.handle),
          persona: persona.name,
          kind: 'task',
          prompt: row.task,
          // The parent's chat: the task's approvals are asked there.
          ...(row.origin ? { origin: row.origin as Origin } : {}),
          source: `subagent:${row.handle}`,
        },
        tx,
      );
    }
  }

  /**
   * Once every task of the batch has ended, its one wake is sent (a job, so a crash before it runs loses nothing);
   * the tasks that end before the last wait for it.
   */
  async function schedulePush(tx: Queryable, parentTurnId: string) {
    if (!(await batchFinished(tx, parentTurnId))) return;
    await deps.jobs.send(QUEUES.subagentPush, { batch: parentTurnId } satisfies SubagentPushJobData, { tx });
  }

  /** One wake in the parent conversation with every ended task of the batch not pushed yet; nothing when none is. */
  async function push(batch: string) {
    await db.transaction(async (tx) => {
      const rows = await claimUnpushed(tx, batch);
      if (rows.length === 0) return;
      const first = rows[0];
      await deps.jobs.enqueueTurn(
        {
          conversationId: first.parentConversationId,
          persona: first.persona,
          kind: 'subagent',
          prompt: resultsText(rows),
          ...(first.origin ? { origin: first.origin as Origin } : {}),
          source: `subagents:${batch}`,
        },
        tx,
      );
      log.info({ batch, tasks: rows.map((r) => r.handle) }, 'task results pushed to their conversation');
    });
  }

  async function cancelTask(row: SubagentTaskRow): Promise<'cancelled' | 'stopping' | 'ended'> {
    // Not started: it never will, and its result is "cancelled".
    const unstarted = await db.transaction(async (tx) => {
      const ended = await finishSubagentTask(tx, row.handle, { status: 'cancelled', error: 'cancelled before it started' }, ['queued']);
      if (ended) await schedulePush(tx, ended.parentTurnId);
      return ended;
    });
    if (unstarted) return 'cancelled';
    const now = await getSubagentTask(db, row.handle);
    if (now?.status !== 'running') return 'ended';
    // Running: its turn stops at its next step (tools in flight get `cancelled`), and its turn's end records it.
    const stopped = await deps.stopConversation(subagentConversationId(row.persona, row.handle));
    if (stopped === 'stopped') return 'stopping';
    // Its turn has not begun: it ends here, and the turn finds it cancelled when it does begin.
    const ended = await db.transaction(async (tx) => {
      const done = await finishSubagentTask(tx, row.handle, { status: 'cancelled', error: 'cancelled' });
      if (done) await schedulePush(tx, done.parentTurnId);
      return done;
    });
    // Its turn may have begun in between: stopped too (one that begins later finds the task cancelled and ends).
    await deps.stopConversation(subagentConversationId(row.persona, row.handle));
    return ended ? 'cancelled' : 'ended';
  }

  function personaOf(name: string): Persona | undefined {
    return deps.personas().find((p) => p.name === name);
  }

  return {
    forTurn(ctx) {
      return {
        async spawn(args) {
          const persona = ctx.persona;
          const limits = persona.tools.subagents;
          const parentTask = await taskOf(ctx.conversationId);
          const depth = (parentTask?.depth ?? 0) + 1;
          if (depth > limits.maxDepth) {
            return { error: limits.maxDepth === 0 ? 'subagents are turned off for this persona' : `a subagent cannot start subagents here (depth limit ${limits.maxDepth}); do the work yourself` };
          }
          const handle = `sub_${randomBytes(5).toString('hex')}`;
          const origin = ctx.origin ?? (parentTask?.origin as Origin | undefined);
          const refused = await db.transaction(async (tx) => {
            // Counted under the persona's lock, so two calls of one turn cannot both pass the limit.
            await lockPersonaTasks(tx, persona.name);
            if ((await countTurnTasks(tx, ctx.turnId)) >= limits.perTurn) return `this turn has started ${limits.perTurn} subagents already, the most one turn may; wait for their results`;
            await insertSubagentTask(tx, {
              handle,
              persona: persona.name,
              label: args.label ?? null,
              task: args.task,
              tools: args.tools ?? null,
              depth,
              parentConversationId: ctx.conversationId,
              parentTurnId: ctx.turnId,
              origin: origin ?? null,
            });
            await dispatch(tx, persona);
            return undefined;
          });
          if (refused) return { error: refused };
          const row = await getSubagentTask(db, handle);
          log.info({ handle, persona: persona.name, parent: ctx.conversationId, status: row?.status }, 'subagent started');
          return { handle, queued: row?.status === 'queued' };
        },

        async status(handle) {
          const rows = handle ? [await getSubagentTask(db, handle)].filter((r): r is SubagentTaskRow => !!r && r.parentConversationId === ctx.conversationId) : await conversationTasks(db, ctx.conversationId);
          if (rows.length === 0) return handle ? `no task ${handle} was started in this conversation` : 'no tasks were started in this conversation';
          const activity = await conversationActivity(db, rows.map((row) => subagentConversationId(row.persona, row.handle)));
          return rows.map((row) => describeTask(row, activity.get(subagentConversationId(row.persona, row.handle)))).join('\n');
        },

        async cancel(which) {
          const rows =
            which === 'all'
              ? await openConversationTasks(db, ctx.conversationId)
              : [await getSubagentTask(db, which)].filter((r): r is SubagentTaskRow => !!r && r.parentConversationId === ctx.conversationId);
          if (rows.length === 0) return which === 'all' ? 'no task is running or waiting' : `no task ${which} was started in this conversation`;
          const lines: string[] = [];
          for (const row of rows) {
            const what = await cancelTask(row);
            lines.push(`${row.handle}: ${what === 'cancelled' ? 'cancelled before it started' : what === 'stopping' ? 'stopping; its result arrives as cancelled' : `already ${(await getSubagentTask(db, row.handle))?.status}`}`);
          }
          return lines.join('\n');
        },
      };
    },

    async finished(data, outcome) {
      const parts = parseConversationId(data.conversationId);
      if (parts?.kind !== 'subagent') return;
      const persona = personaOf(parts.persona);
      const status: SubagentStatus =
        outcome.status === 'ok' || outcome.status === 'skipped'
          ? 'ok'
          : outcome.status === 'cancelled'
            ? 'cancelled'
            : outcome.error === 'turn time budget exhausted'
              ? 'timeout'
              : 'failed';
      await db.transaction(async (tx) => {
        const row = await finishSubagentTask(tx, parts.handle, {
          status,
          result: status === 'ok' ? (outcome.reply ?? '') : undefined,
          error: status === 'ok' ? undefined : (outcome.error ?? status),
        });
        // Ended before (a rerun after a crash, or cancelled meanwhile): nothing to record or push again.
        if (!row) return;
        if (persona) await dispatch(tx, persona);
        await schedulePush(tx, row.parentTurnId);
      });
    },

    async cancelConversation(conversationId) {
      const rows = await openConversationTasks(db, conversationId);
      for (const row of rows) await cancelTask(row);
      return rows.length;
    },

    task: taskOf,

    async start() {
      if (!deps.worker) return;
      workerId = await deps.jobs.boss.work<SubagentPushJobData>(QUEUES.subagentPush, { batchSize: 1, pollingIntervalSeconds: 1 }, async ([job]) => push(job.data.batch));
    },
    async stop() {
      if (workerId) await deps.jobs.boss.offWork(QUEUES.subagentPush, { wait: true }).catch(() => {});
    },
  };

  async function taskOf(conversationId: string): Promise<SubagentTaskRow | undefined> {
    const parts = parseConversationId(conversationId);
    return parts?.kind === 'subagent' ? getSubagentTask(db, parts.handle) : undefined;
  }
}


/** The wake's text: each task with its state and (for one that finished) the start of its answer. */
export function resultsText(rows: readonly SubagentTaskRow[]): string {
  const head = rows.length === 1 ? '[subagent result] A task you started has ended:' : `[subagent results] ${rows.length} tasks you started have ended:`;
  const body = rows.map((row) => {
    const name = `${row.handle}${row.label ? ` "${row.label}"` : ''}`;
    if (row.status !== 'ok') return `- ${name}: ${row.status}${row.error && row.status === 'failed' ? ` (${shorten(row.error, 200)})` : ''}`;
    const text = (row.result ?? '').trim() || '(no text)';
    const cut = text.length > RESULT_LIMIT ? `${text.slice(0, RESULT_LIMIT)}… [${text.length - RESULT_LIMIT} more characters in the task's conversation]` : text;
    return `- ${name}: ok\n${cut.replace(/^/gm, '  ')}`;
  });
  return [head, ...body, 'Tell the person what matters from this; task_status lists every task.'].join('\n');
}

function shorten(text: string, max: number): string {
  const line = text.split('\n')[0].trim();
  return line.length > max ? `${line.slice(0, max)}…` : line;
}

function describeTask(row: SubagentTaskRow, activity: { steps: number; lastTool?: string } = { steps: 0 }): string {
  const { steps, lastTool: tool } = activity;
  const started = row.startedAt ?? row.createdAt;
  const end = row.finishedAt ?? new Date();
  const elapsed = Math.max(0, Math.round((end.getTime() - started.getTime()) / 1000));
  return [
    `${row.handle}${row.label ? ` "${row.label}"` : ''}: ${row.status}`,
    row.startedAt ? `started ${row.startedAt.toISOString()}` : `queued since ${row.createdAt.toISOString()}`,
    `${elapsed} s`,
    `${steps} model steps`,
    tool ? `last tool ${tool}` : undefined,
    row.error && row.status !== 'ok' ? `(${shorten(row.error, 120)})` : undefined,
  ]
    .filter(Boolean)
    .join(' · ');
}
