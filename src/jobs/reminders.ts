import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { Persona } from '#src/config/persona.ts';
import { ConfigError } from '#src/config/errors.ts';
import type { Database, Queryable } from '#src/db/client.ts';
import {
  cancelReminder,
  countPendingReminders,
  insertReminder,
  lockPersonaReminders,
  reminderOfCall,
  lockReminder,
  pendingReminders,
  recordReminderFired,
  strandedReminders,
  nextDueTime,
  type NewReminder,
  type ReminderRow,
} from '#src/db/reminders.ts';
import type { ReminderView, SchedulingApi } from '#src/tools/types.ts';
import type { JobSystem } from './boss.ts';
import { QUEUES, type ReminderJobData } from './queues.ts';
import { stableUuid } from './stable-uuid.ts';
import { joinWaitingWake, turnStillQueued } from './waiting-turns.ts';
import { CHANNELS, listen, notify } from '#src/db/channels.ts';
import type { DeliveryTarget, TurnJobData } from '#src/turns.ts';

/** A firing this much after its time says so in the turn (Parlor was down, say). */
const LATE_AFTER_MS = 60_000;
/** A pending reminder this long overdue with no job behind it has lost its job. */
const STRANDED_AFTER_SECONDS = 120;
/** How long a reminder job outlives its due time before pg-boss may drop it unstarted. */
const RETENTION_AFTER_DUE_SECONDS = 30 * 24 * 3600;

/** What reminders and wake-ups may cost, so that nobody buys a model turn every second. */
export const REMINDER_LIMITS = {
  /** The shortest repeat (every_seconds, a looping wake-up's time): at most a turn a minute per reminder. */
  minEverySeconds: 60,
  /** Reminders a persona may have pending at once (wake-ups, one per conversation, are not counted). */
  maxPending: 100,
  /** Firings of one repeating reminder or looping wake-up; the turn of the last one is told it was the last. */
  maxFires: 1000,
  /** Reminders one group member who is not among the persona's people may have pending, so they cannot fill its quota. */
  maxPendingPerOutsider: 5,
} as const;

/** A reminder refused because the persona has as many pending as it may. */
export class TooManyReminders extends Error {
  override name = 'TooManyReminders';
}

export type Reminders = ReturnType<typeof createReminders>;

/** Who set a reminder and where, and whether they are an outsider (a group member who is not one of the persona's people). */
export interface ReminderScope {
  persona: Persona;
  conversationId: string;
  origin?: NewReminder['origin'];
  /** The outsider's sender id: they see and cancel only the reminders they set. */
  outsider?: string;
}

/**
 * Reminders and wake-ups: a pg-boss job per firing, due at its time, and a timer that wakes the worker when the
 * next one falls due. A firing becomes a turn job in the same transaction that records it, so a redelivered job
 * finds it done and fires nothing twice.
 */
export function createReminders(deps: {
  database: Database;
  jobs: JobSystem;
  timezone: string;
  log: Logger;
  /** How many reminders fire at once. */
  concurrency?: number;
}) {
  const { db } = deps.database;
  const { boss } = deps.jobs;
  const { log } = deps;
  let reminderWorker: string | undefined;
  let timer: NodeJS.Timeout | undefined;
  let listener: { unlisten(): Promise<void> } | undefined;
  let stopped = false;

  /** Tells every process (after commit) that something falls due at `dueAt`. */
  const notifyTimers = (tx: Queryable, dueAt: Date) => notify(tx, CHANNELS.timer, dueAt.toISOString());
  let generation = 0;

  /** Wakes the reminder worker at the next due time still ahead, instead of waiting for its poll. */
  async function arm() {
    if (stopped || !reminderWorker) return;
    const mine = ++generation;
    const next = await nextDueTime(db);
    // A later call has looked since: its answer is the newer one.
    if (mine !== generation) return;
    clearTimeout(timer);
    if (!next) return;
    // Far-off times are looked at again later; a timer that long would only drift.
    timer = setTimeout(
      () => {
        wake();
        void arm().catch(() => {});
      },
      Math.min(Math.max(0, next.getTime() - Date.now() + 5), 3_600_000),
    );
    timer.unref();
  }

  const wake = () => {
    if (reminderWorker && !stopped) boss.notifyWorker(reminderWorker);
  };

  /** Something was scheduled somewhere: due now, the worker looks at once; later, the timer is set for it. */
  function onTimerNotice(payload: string) {
    const due = Date.parse(payload);
    if (Number.isFinite(due) && due <= Date.now() + 5) wake();
    void arm().catch(() => {});
  }

  async function scheduleFiring(tx: Queryable, row: ReminderRow) {
    const delaySeconds = Math.max(0, (row.dueAt.getTime() - Date.now()) / 1000);
    await deps.jobs.send(QUEUES.reminder, { reminderId: row.id, fire: row.fires } satisfies ReminderJobData, {
      tx,
      id: stableUuid(`reminder:${row.id}:${row.fires}`),
      startAfter: row.dueAt,
      retentionSeconds: Math.ceil(delaySeconds) + RETENTION_AFTER_DUE_SECONDS,
    });
    await notifyTimers(tx, row.dueAt);
  }

  /** One firing: the turn is enqueued and the next firing scheduled in the transaction that records it. */
  async function fireReminder(job: { id: string; data: ReminderJobData }) {
    const fired = await db.transaction(async (tx) => {
      const row = await lockReminder(tx, job.data.reminderId);
      // Cancelled, finished, or this firing already happened (a redelivered job).
      if (!row || row.status !== 'pending' || row.fires !== job.data.fire) return undefined;
      const now = Date.now();
      const lateMs = now - row.dueAt.getTime();
      // The last firing a repeat may have: it ends here, whatever its `until`.
      const endsAtLimit = Boolean(row.everySeconds) && row.fires + 1 >= REMINDER_LIMITS.maxFires;
      let next: Date | undefined;
      if (row.everySeconds && !endsAtLimit) {
        // Occurrences missed while Parlor was down fire once, now; the next one is the first still ahead.
        const step = row.everySeconds * 1000;
        const skipped = Math.max(1, Math.ceil((now - row.dueAt.getTime()) / step));
        next = new Date(row.dueAt.getTime() + skipped * step);
        if (next.getTime() <= now) next = new Date(next.getTime() + step);
        if (row.until && next > row.until) next = undefined;
      }
      await recordReminderFired(tx, row.id, { fires: row.fires + 1, dueAt: next ?? row.dueAt, status: next ? 'pending' : 'done' });
      if (next) await scheduleFiring(tx, { ...row, fires: row.fires + 1, dueAt: next });
      // A repeat whose previous turn has not run yet is skipped: turns slower than the interval never pile up.
      // The last one always runs, so that the turn can say the repeat is over.
      if (row.fires > 0 && row.everySeconds && !endsAtLimit && (await turnStillQueued(tx, `reminder:${row.id}`))) {
        return { row, lateMs, skipped: true };
      }
      const data = {
        conversationId: row.conversationId,
        persona: row.persona,
        kind: 'wake',
        prompt: firingPrompt(row, lateMs, deps.timezone, endsAtLimit),
        origin: row.origin ?? undefined,
        deliver: row.deliver ?? undefined,
        source: `reminder:${row.id}`,
      } satisfies TurnJobData;
      // Reminders of one chat that fall due together wake one turn, not one after another.
      if (await joinWaitingWake(tx, data)) return { row, lateMs, skipped: false, joined: true };
      await deps.jobs.enqueueTurn(data, tx, { id: stableUuid(`reminder-turn:${row.id}:${row.fires}`) });
      return { row, lateMs, skipped: false, joined: false };
    });
    if (fired) {
      log.info(
        { reminder: fired.row.name, persona: fired.row.persona, lateMs: fired.lateMs, skipped: fired.skipped || undefined, joined: fired.joined || undefined },
        'reminder fired',
      );
    }
  }

  /** The reminders and wake-up a turn's tools set, cancel and list. */
  function forTurn(scope: ReminderScope): Pick<SchedulingApi, 'wakeup' | 'remind' | 'cancelReminder'> & { pending(): Promise<ReminderView[]> } {
    const { persona, origin, outsider } = scope;
    const wakeupName = `wakeup:${scope.conversationId}`;
    return {
      async wakeup({ delayMs, message, loop }) {
        return db.transaction(async (tx) => {
          if (outsider !== undefined) {
            // A shared group's wake-up that one of the persona's people set is theirs to change.
            const [current] = (await pendingReminders(tx, persona.name)).filter((r) => r.name === wakeupName);
            if (current && current.origin?.sender !== outsider) {
              throw new ConfigError("this conversation's wake-up was set by one of the persona's users; only they can change or cancel it");
            }
          }
          const replaced = await cancelReminder(tx, persona.name, wakeupName);
          if (delayMs === 0) return { replaced: Boolean(replaced) };
          const row = await insertReminder(tx, {
            id: randomUUID(),
            persona: persona.name,
            name: wakeupName,
            kind: 'wakeup',
            conversationId: scope.conversationId,
            prompt: message ?? '',
            origin,
            dueAt: new Date(Date.now() + delayMs),
            everySeconds: loop ? Math.max(1, Math.round(delayMs / 1000)) : null,
          });
          await scheduleFiring(tx, row);
          return { dueAt: row.dueAt, replaced: Boolean(replaced) };
        });
      },
      async remind({ name, prompt, dueAt, everySeconds, until, deliver, callKey }) {
        const row = await db.transaction(async (tx) => {
          await lockPersonaReminders(tx, persona.name);
          // The same call run again (its turn resumed after a crash): what it set the first time, fired or not.
          const earlier = callKey === undefined ? undefined : await reminderOfCall(tx, persona.name, callKey);
          if (earlier) return earlier;
          if ((await countPendingReminders(tx, persona.name)) >= REMINDER_LIMITS.maxPending) {
            throw new TooManyReminders(`${persona.name} has ${REMINDER_LIMITS.maxPending} pending reminders, the most it may have`);
          }
          if (outsider !== undefined && (await countPendingReminders(tx, persona.name, outsider)) >= REMINDER_LIMITS.maxPendingPerOutsider) {
            throw new TooManyReminders(`${outsider} has ${REMINDER_LIMITS.maxPendingPerOutsider} pending reminders here, the most someone who is not one of ${persona.name}'s users may have`);
          }
          const inserted = await insertReminder(tx, {
            id: randomUUID(),
            persona: persona.name,
            name,
            kind: 'reminder',
            conversationId: scope.conversationId,
            prompt,
            origin,
            deliver,
            dueAt,
            everySeconds: everySeconds ?? null,
            until: until ?? null,
            callId: callKey ?? null,
          });
          await scheduleFiring(tx, inserted);
          return inserted;
        });
        return reminderView(row);
      },
      async cancelReminder(name) {
        return Boolean(await cancelReminder(db, persona.name, name, outsider));
      },
      async pending() {
        return (await pendingReminders(db, persona.name, outsider)).map(reminderView);
      },
    };
  }

  /** A pending reminder whose job was lost (failed for good, deleted) gets a new one. */
  async function resendStranded() {
    for (const row of await strandedReminders(db, STRANDED_AFTER_SECONDS)) {
      await deps.jobs.send(QUEUES.reminder, { reminderId: row.id, fire: row.fires } satisfies ReminderJobData, {
        id: stableUuid(`reminder:${row.id}:${row.fires}:rescue:${Math.floor(Date.now() / 600_000)}`),
        retentionSeconds: RETENTION_AFTER_DUE_SECONDS,
      });
      log.warn({ reminder: row.name, persona: row.persona }, 'reminder had lost its job; sent again');
    }
  }

  return {
    forTurn,
    resendStranded,
    arm,
    async startWorker() {
      reminderWorker = await boss.work<ReminderJobData>(
        QUEUES.reminder,
        // A full batch is followed by the next at once; the poll is only the fallback to the timer.
        { batchSize: 50, pollingIntervalSeconds: 1, burstWhenBatchFull: true },
        async (jobs) => {
          // Jobs of a batch fire side by side, a few at a time (each is a short transaction).
          const queue = [...jobs];
          const errors: unknown[] = [];
          await Promise.all(
            Array.from({ length: Math.min(deps.concurrency ?? 8, queue.length) }, async () => {
              for (let job = queue.shift(); job; job = queue.shift()) {
                await fireReminder(job).catch((err: unknown) => {
                  log.error({ err, job: job!.id }, 'reminder firing failed; it is retried');
                  errors.push(err);
                });
              }
            }),
          );
          if (errors.length) throw errors[0];
        },
      );
    },
    async listenForTimers() {
      listener = await listen(deps.database.sql, CHANNELS.timer, onTimerNotice);
    },
    /** The timer is off at once; the listener and the worker are let go by `stop`. */
    stopTimer() {
      stopped = true;
      clearTimeout(timer);
    },
    async stop() {
      await listener?.unlisten().catch(() => {});
      await boss.offWork(QUEUES.reminder, { wait: true }).catch(() => {});
    },
  };
}

function reminderView(row: ReminderRow): ReminderView {
  return {
    name: row.name,
    kind: row.kind,
    prompt: row.prompt,
    dueAt: row.dueAt.toISOString(),
    everySeconds: row.everySeconds ?? undefined,
    until: row.until?.toISOString(),
    deliver: (row.deliver as DeliveryTarget | null) ?? undefined,
    fires: row.fires,
  };
}

/** What the turn reads when a reminder or wake-up fires (`last`: the repeat ends here, at its limit of firings). */
function firingPrompt(row: ReminderRow, lateMs: number, timezone: string, last: boolean): string {
  const label = row.kind === 'wakeup' ? '[wake-up]' : `[reminder "${row.name}"]`;
  const text = row.prompt || (row.kind === 'wakeup' ? 'You asked to be woken up now.' : '');
  let late = '';
  if (lateMs > LATE_AFTER_MS) {
    const due = new Intl.DateTimeFormat('en-GB', { timeZone: timezone, dateStyle: 'medium', timeStyle: 'short' }).format(row.dueAt);
    late = `\n(late: this was due at ${due} ${timezone} and fires ${formatLateness(lateMs)} late, because Parlor was not running then)`;
  }
  let end = '';
  if (last) {
    end =
      row.kind === 'wakeup'
        ? `\n(this is the last wake-up of the loop: a loop repeats at most ${REMINDER_LIMITS.maxFires} times; call schedule_wakeup again if it should go on)`
        : `\n(this is the last time: a repeating reminder fires at most ${REMINDER_LIMITS.maxFires} times; set it again if it should go on)`;
  }
  return `${label} ${text}${late}${end}`.trim();
}

function formatLateness(ms: number): string {
  const minutes = Math.round(ms / 60_000);
  if (minutes < 60) return `${minutes} min`;
  const hours = Math.floor(minutes / 60);
  return `${hours} h ${minutes % 60} min`;
}
