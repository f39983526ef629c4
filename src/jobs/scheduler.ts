import { isPersonaPerson, type Persona } from '#src/config/persona.ts';
import type { SchedulingApi } from '#src/tools/types.ts';
import { createReminders } from './reminders.ts';
import { createSchedules, type SchedulesDeps } from './schedules.ts';
import type { Origin } from '#src/turns.ts';

export type Scheduler = ReturnType<typeof createScheduler>;

/**
 * Everything that happens later: reminders and wake-ups (a pg-boss job per firing, due at its time) and the
 * heartbeat and cron entries of `schedules.jsonc` (pg-boss schedules in PARLOR_TIMEZONE). A firing becomes a
 * turn job in the same transaction that records it, so a redelivered job finds it done and fires nothing twice.
 */
export function createScheduler(deps: SchedulesDeps & {
  /** How many reminders fire at once. */
  concurrency?: number;
}) {
  const log = deps.log.child({ module: 'scheduler' });
  const reminders = createReminders({ database: deps.database, jobs: deps.jobs, timezone: deps.timezone, log, concurrency: deps.concurrency });
  const schedules = createSchedules({
    database: deps.database,
    jobs: deps.jobs,
    personas: deps.personas,
    timezone: deps.timezone,
    log,
    knownConnectors: deps.knownConnectors,
  });

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
    // A group member who is not one of the persona's people sees and cancels only the reminders they set.
    const outsider = origin?.chatType === 'group' && !isPersonaPerson(persona, origin.sender) ? (origin.sender ?? '') : undefined;
    const reminding = reminders.forTurn({ persona, conversationId: scope.conversationId, origin, outsider });
    const { list: listSchedules, ...scheduling } = schedules.forPersona(persona);
    return {
      wakeup: reminding.wakeup,
      remind: reminding.remind,
      cancelReminder: reminding.cancelReminder,
      async list() {
        // The persona's standing work (and reminders set in other chats) is its people's business.
        if (outsider !== undefined) return { schedules: [], reminders: await reminding.pending(), onlyOwn: true };
        return { schedules: await listSchedules(), reminders: await reminding.pending() };
      },
      ...scheduling,
    };
  }

  /**
   * Every minute: a pending reminder whose job was lost (failed for good, deleted) gets a new one, and pg-boss's
   * schedules are matched to the files again (hand edits included).
   */
  async function housekeeping() {
    await reminders.resendStranded();
    for (const persona of deps.personas()) schedules.currentSchedules(persona);
    await schedules.syncSchedules();
  }
  let housekeepingTimer: NodeJS.Timeout | undefined;
  let housekeepingRun: Promise<void> | undefined;

  return {
    forTurn,
    syncSchedules: schedules.syncSchedules,
    housekeeping,
    async start() {
      await reminders.startWorker();
      await schedules.startWorker();
      await reminders.listenForTimers();
      await schedules.syncSchedules();
      await reminders.arm();
      schedules.watchFiles();
      housekeepingTimer = setInterval(() => {
        housekeepingRun ??= housekeeping()
          .catch((err: unknown) => log.warn({ err }, 'scheduler housekeeping failed'))
          .finally(() => (housekeepingRun = undefined));
      }, 60_000);
      housekeepingTimer.unref();
    },
    async stop() {
      reminders.stopTimer();
      schedules.stopWatching();
      clearInterval(housekeepingTimer);
      await housekeepingRun;
      await reminders.stop();
      await schedules.stop();
    },
  };
}
