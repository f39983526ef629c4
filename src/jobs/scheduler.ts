import { createHash, randomUUID } from 'node:crypto';
import { CronExpressionParser } from 'cron-parser';
import { sql } from 'drizzle-orm';
import type { Logger } from 'pino';
import { ConfigError } from '#src/config/errors.ts';
import { isPersonaChat, isPersonaPerson, loadSchedules, type Persona, type ScheduleEntry } from '#src/config/persona.ts';
import { editSchedules } from '#src/config/schedules-file.ts';
import type { Database, Queryable } from '#src/db/client.ts';
import {
  cancelReminder,
  countPendingReminders,
  insertReminder,
  lockPersonaReminders,
  reminderOfCall,
  isSchedulePaused,
  lockReminder,
  pausedSchedules,
  pauseSchedules,
  pendingReminders,
  recordReminderFired,
  strandedReminders,
  resumeSchedules,
  nextDueTime,
  type ReminderRow,
} from '#src/db/reminders.ts';
import type { ReminderView, ScheduleView, SchedulingApi } from '#src/tools/types.ts';
import type { JobSystem } from './boss.ts';
import { QUEUES, type CronJobData, type ReminderJobData } from './queues.ts';
import { watchScheduleFiles } from './schedule-watch.ts';
import { joinWaitingWake, turnStillQueued } from './waiting-turns.ts';
import { CHANNELS, listen, notify } from '#src/db/channels.ts';
import { cronConversationId, heartbeatConversationId } from '#src/conversation-id.ts';
import type { DeliveryTarget, Origin, TurnJobData, TurnKind } from '#src/turns.ts';

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

export type Scheduler = ReturnType<typeof createScheduler>;

/** A UUID that is the same for the same text: a job sent twice under it is stored once. */
export function stableUuid(text: string): string {
  const h = createHash('sha256').update(text).digest('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-5${h.slice(13, 16)}-${((parseInt(h[16], 16) & 3) | 8).toString(16)}${h.slice(17, 20)}-${h.slice(20, 32)}`;
}

/**
 * Everything that happens later: reminders and wake-ups (a pg-boss job per firing, due at its time) and the
 * heartbeat and cron entries of `schedules.jsonc` (pg-boss schedules in PARLOR_TIMEZONE). A firing becomes a
 * turn job in the same transaction that records it, so a redelivered job finds it done and fires nothing twice.
 */
export function createScheduler(deps: {
  database: Database;
  jobs: JobSystem;
  personas: () => readonly Persona[];
  timezone: string;
  log: Logger;
  /** Connectors that run somewhere in this deployment (a schedule's `deliver` must name one). */
  knownConnectors: () => string[];
  /** How many reminders fire at once. */
  concurrency?: number;
}) {
  const { db } = deps.database;
  const { boss } = deps.jobs;
  const log = deps.log.child({ module: 'scheduler' });
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

  /** A heartbeat or cron occurrence: the entry is read from its file now, so edits apply without a restart. */
  async function fireSchedule(job: { id: string; data: CronJobData }) {
    const { persona: personaName, name } = job.data;
    const persona = deps.personas().find((p) => p.name === personaName);
    if (!persona) {
      log.warn({ persona: personaName, schedule: name }, 'schedule of an unknown persona skipped');
      return;
    }
    const entry = currentSchedules(persona).find((e) => e.name === name);
    if (!entry || entry.enabled === false) return;
    if (await isSchedulePaused(db, persona.name, name)) {
      log.info({ persona: persona.name, schedule: name }, 'paused schedule skipped');
      return;
    }
    // The previous occurrence's turn has not started yet (a slow model, a busy worker): this one is skipped.
    if (await turnStillQueued(db, scheduleSource(persona.name, name))) {
      log.info({ persona: persona.name, schedule: name }, 'schedule skipped: its previous turn is still waiting');
      return;
    }
    await enqueueScheduleTurn(persona, entry, `cron-turn:${job.id}`);
  }

  const scheduleSource = (persona: string, name: string) => `schedule:${persona}/${name}`;

  async function enqueueScheduleTurn(persona: Persona, entry: ScheduleEntry, key: string) {
    const kind: TurnKind = entry.type === 'heartbeat' ? 'heartbeat' : 'cron';
    const conversationId =
      kind === 'heartbeat'
        ? heartbeatConversationId(persona.name)
        : cronConversationId(persona.name, entry.name, entry.fresh ? { at: new Date(), random: randomUUID() } : undefined);
    await deps.jobs.enqueueTurn(
      {
        conversationId,
        persona: persona.name,
        kind,
        prompt: `[${kind} "${entry.name}"] ${entry.prompt}`,
        deliver: entry.deliver ? { connector: entry.deliver.connector, chat: entry.deliver.to, thread: entry.deliver.thread } : undefined,
        source: scheduleSource(persona.name, entry.name),
      },
      undefined,
      { id: stableUuid(key) },
    );
    log.info({ persona: persona.name, schedule: entry.name, kind }, 'schedule fired');
  }

  /** The persona's entries as its file says now (the loaded ones when the file became unreadable). */
  function currentSchedules(persona: Persona): ScheduleEntry[] {
    try {
      persona.schedules = loadSchedules(persona.dir);
    } catch (err) {
      log.warn({ err: (err as Error).message, persona: persona.name }, 'schedules.jsonc unreadable; using the last good version');
    }
    return persona.schedules;
  }

  const scheduleKey = (persona: string, name: string) => `${persona}/${name}`;

  /** Makes pg-boss's schedules match the personas' entries: added, changed and removed ones. */
  async function syncSchedules(only?: Persona) {
    const personas = only ? [only] : deps.personas();
    const wanted = new Map<string, { persona: Persona; entry: ScheduleEntry }>();
    for (const persona of personas) {
      for (const entry of persona.schedules) if (entry.enabled !== false) wanted.set(scheduleKey(persona.name, entry.name), { persona, entry });
    }
    const existing = await boss.getSchedules(QUEUES.cron);
    for (const schedule of existing) {
      const owner = schedule.key.split('/')[0];
      const inScope = only ? owner === only.name : true;
      if (!inScope) continue;
      const want = wanted.get(schedule.key);
      if (!want) await boss.unschedule(QUEUES.cron, schedule.key);
      else if (want.entry.cron === schedule.cron && schedule.timezone === deps.timezone && schedule.options?.missed === missedPolicy(want.entry)) {
        wanted.delete(schedule.key);
      }
    }
    for (const [key, { persona, entry }] of wanted) {
      await boss.schedule(QUEUES.cron, entry.cron, { persona: persona.name, name: entry.name } satisfies CronJobData, {
        tz: deps.timezone,
        key,
        missed: missedPolicy(entry),
      });
    }
  }

  /** An entry as `list` shows it: paused or not, and when it runs next (never, when it is disabled). */
  function view(entry: ScheduleEntry, paused: string[]): ScheduleView {
    let nextRun: string | undefined;
    if (entry.enabled !== false) {
      try {
        nextRun = CronExpressionParser.parse(entry.cron, { tz: deps.timezone }).next().toDate().toISOString();
      } catch {
        nextRun = undefined;
      }
    }
    return { ...entry, paused: paused.includes('*') || paused.includes(entry.name), nextRun };
  }

  async function scheduleChanged(persona: Persona, entries: ScheduleEntry[]) {
    persona.schedules = entries;
    await syncSchedules(persona);
  }

  /** The scheduling a turn's tools get: its persona and conversation. */
  function forTurn(scope: { persona: Persona; conversationId: string; origin?: Origin }): SchedulingApi {
    const { persona } = scope;
    // Who set it, and where: a reminder set in a group may reach only what its sender could reach.
    const origin = scope.origin && {
      connector: scope.origin.connector,
      chat: scope.origin.chat,
      thread: scope.origin.thread,
      chatType: scope.origin.chatType,
      sender: scope.origin.sender,
    };
    const wakeupName = `wakeup:${scope.conversationId}`;
    // A group member who is not one of the persona's people sees and cancels only the reminders they set.
    const outsider = origin?.chatType === 'group' && !isPersonaPerson(persona, origin.sender) ? (origin.sender ?? '') : undefined;
    const find = (entries: ScheduleEntry[], name: string) => {
      const index = entries.findIndex((e) => e.name === name);
      if (index < 0) throw new ConfigError(`there is no schedule named "${name}"; existing: ${entries.map((e) => e.name).join(', ') || 'none'}`);
      return index;
    };
    /**
     * Changes the file and pg-boss's schedules together, one change at a time per persona across every process
     * (an advisory lock): two edits never lose each other, and the schedules follow the file.
     */
    const edit = (change: Parameters<typeof editSchedules>[1]) =>
      db.transaction(async (tx) => {
        await tx.execute(sql`select pg_advisory_xact_lock(hashtext(${`parlor:schedules:${persona.name}`}))`);
        const entries = editSchedules(persona.dir, change);
        await scheduleChanged(persona, entries);
        return entries;
      });
    const checkDeliver = (deliver: ScheduleEntry['deliver']) => {
      if (!deliver) return;
      if (!deps.knownConnectors().includes(deliver.connector)) throw new ConfigError(`deliver: no connector named "${deliver.connector}" is configured`);
      if (!isPersonaChat(persona, { connector: deliver.connector, chat: deliver.to })) {
        throw new ConfigError(`deliver: ${deliver.connector}:${deliver.to} is not one of your chats (users, channels or primary in connectors.jsonc)`);
      }
    };
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
      async list() {
        // The persona's standing work (and reminders set in other chats) is its people's business.
        if (outsider !== undefined) return { schedules: [], reminders: (await pendingReminders(db, persona.name, outsider)).map(reminderView), onlyOwn: true };
        const paused = await pausedSchedules(db, persona.name);
        const schedules = currentSchedules(persona).map((e) => view(e, paused));
        return { schedules, reminders: (await pendingReminders(db, persona.name)).map(reminderView) };
      },
      async addSchedule(entry) {
        checkDeliver(entry.deliver);
        await edit(() => ({ append: entry }));
        return view(entry, await pausedSchedules(db, persona.name));
      },
      async updateSchedule(name, patch) {
        checkDeliver(patch.deliver);
        let merged: ScheduleEntry | undefined;
        await edit((entries) => {
          const index = find(entries, name);
          merged = { ...entries[index], ...patch, name };
          return { index, value: merged };
        });
        return view(merged!, await pausedSchedules(db, persona.name));
      },
      async removeSchedule(name) {
        await edit((entries) => ({ index: find(entries, name), value: undefined }));
      },
      async runNow(name) {
        const entries = currentSchedules(persona);
        await enqueueScheduleTurn(persona, entries[find(entries, name)], `run-now:${randomUUID()}`);
      },
      async pause(name) {
        if (name) find(currentSchedules(persona), name);
        await pauseSchedules(db, persona.name, name ?? '*');
      },
      async resume(name) {
        // Without a name: everything, the pause of all and single ones.
        if (!name) {
          await resumeSchedules(db, persona.name, '*');
          return;
        }
        const entries = currentSchedules(persona);
        find(entries, name);
        await db.transaction(async (tx) => {
          if ((await pausedSchedules(tx, persona.name)).includes('*')) {
            // Released from a pause of all: the others stay held, one by one.
            await resumeSchedules(tx, persona.name, '*');
            for (const other of entries) if (other.name !== name) await pauseSchedules(tx, persona.name, other.name);
          } else {
            await resumeSchedules(tx, persona.name, name);
          }
        });
      },
    };
  }

  /**
   * Every minute: a pending reminder whose job was lost (failed for good, deleted) gets a new one, and pg-boss's
   * schedules are matched to the files again (hand edits included).
   */
  async function housekeeping() {
    for (const row of await strandedReminders(db, STRANDED_AFTER_SECONDS)) {
      await deps.jobs.send(QUEUES.reminder, { reminderId: row.id, fire: row.fires } satisfies ReminderJobData, {
        id: stableUuid(`reminder:${row.id}:${row.fires}:rescue:${Math.floor(Date.now() / 600_000)}`),
        retentionSeconds: RETENTION_AFTER_DUE_SECONDS,
      });
      log.warn({ reminder: row.name, persona: row.persona }, 'reminder had lost its job; sent again');
    }
    for (const persona of deps.personas()) currentSchedules(persona);
    await syncSchedules();
  }
  let housekeepingTimer: NodeJS.Timeout | undefined;
  let watcher: { stop(): void } | undefined;
  let housekeepingRun: Promise<void> | undefined;

  return {
    forTurn,
    syncSchedules,
    housekeeping,
    async start() {
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
      await boss.work<CronJobData>(QUEUES.cron, { batchSize: 10, pollingIntervalSeconds: 2 }, async (jobs) => {
        for (const job of jobs) await fireSchedule(job);
      });
      listener = await listen(deps.database.sql, CHANNELS.timer, onTimerNotice);
      await syncSchedules();
      await arm();
      watcher = watchScheduleFiles(
        deps.personas(),
        (persona) => {
          currentSchedules(persona);
          void syncSchedules(persona)
            .then(() => log.info({ persona: persona.name }, 'schedules.jsonc changed; schedules updated'))
            .catch((err: unknown) => log.warn({ err, persona: persona.name }, 'schedules could not be updated after an edit'));
        },
        log,
      );
      housekeepingTimer = setInterval(() => {
        housekeepingRun ??= housekeeping()
          .catch((err: unknown) => log.warn({ err }, 'scheduler housekeeping failed'))
          .finally(() => (housekeepingRun = undefined));
      }, 60_000);
      housekeepingTimer.unref();
    },
    async stop() {
      stopped = true;
      watcher?.stop();
      clearTimeout(timer);
      clearInterval(housekeepingTimer);
      await housekeepingRun;
      await listener?.unlisten().catch(() => {});
      await boss.offWork(QUEUES.reminder, { wait: true }).catch(() => {});
      await boss.offWork(QUEUES.cron, { wait: true }).catch(() => {});
    },
  };
}

/** A cron job missed while Parlor was down runs once when it is back; a missed heartbeat is simply skipped. */
function missedPolicy(entry: ScheduleEntry): 'once' | 'skip' {
  return entry.type === 'cron' ? 'once' : 'skip';
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
