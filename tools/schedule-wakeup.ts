import { ConfigError } from '#src/config/errors.ts';
import { isPersonaPerson } from '#src/config/persona.ts';
import { DuplicateReminderName } from '#src/db/reminders.ts';
import { REMINDER_LIMITS } from '#src/jobs/reminders.ts';
import { parseDuration } from '#src/tools/duration.ts';
import type { Tool } from '#src/tools/types.ts';
import { chainFloorMs, chainReason } from './remind.ts';

interface Args {
  time: string | number;
  message?: string;
  loop?: boolean;
}

const MAX_DELAY_MS = 365 * 24 * 3600_000;

/** One wake-up per conversation: a later call replaces it, `"0"` cancels it, `loop` re-arms it after each firing. */
export function createScheduleWakeupTool(): Tool<Args> {
  return {
    name: 'schedule_wakeup',
    description:
      'Wake yourself up later in this conversation: after `time` ("90s", "30m", "2h", or a number of minutes) `message` arrives as a new turn. ' +
      'There is one wake-up per conversation: a new call replaces it, and time "0" cancels it. ' +
      `loop: true repeats it every \`time\` (at least ${REMINDER_LIMITS.minEverySeconds}s, at most ${REMINDER_LIMITS.maxFires} times) until cancelled.`,
    parameters: {
      type: 'object',
      additionalProperties: false,
      required: ['time'],
      properties: {
        time: { type: ['string', 'number'] },
        message: { type: 'string', maxLength: 4000 },
        loop: { type: 'boolean' },
      },
    },
    async run(args, ctx) {
      if (!ctx.scheduling) return 'error: scheduling is not available here';
      const delay = parseDuration(args.time, 'minutes');
      if ('error' in delay) return `error: time ${delay.error}; "0" cancels`;
      if (delay.ms === 0) {
        try {
          const { replaced } = await ctx.scheduling.wakeup({ delayMs: 0 });
          return replaced ? 'wake-up cancelled' : 'ok: there was no wake-up to cancel';
        } catch (err) {
          if (err instanceof ConfigError) return `error: ${err.message}`;
          throw err;
        }
      }
      if (delay.ms < 1000) return 'error: time must be at least 1 second';
      const floor = chainFloorMs(ctx);
      if (delay.ms < floor) return `error: ${chainReason(ctx)} a wake-up is at least ${floor / 1000}s away (so wake-ups never chain into a turn every second)`;
      if (args.loop) {
        if (ctx.origin?.chatType === 'group' && !isPersonaPerson(ctx.persona, ctx.origin.sender)) {
          return "error: only the persona's own users can set a looping wake-up here; without loop it is fine";
        }
        if (delay.ms < REMINDER_LIMITS.minEverySeconds * 1000) {
          return `error: a looping wake-up repeats at most once a minute; give a time of at least ${REMINDER_LIMITS.minEverySeconds}s`;
        }
      }
      if (delay.ms > MAX_DELAY_MS) return 'error: time must be at most 365 days; use remind with a date for later';
      let set: Awaited<ReturnType<NonNullable<typeof ctx.scheduling>['wakeup']>>;
      try {
        set = await ctx.scheduling.wakeup({ delayMs: delay.ms, message: args.message, loop: args.loop });
      } catch (err) {
        // Two calls at once in one turn: the first one stands.
        if (err instanceof DuplicateReminderName) return 'error: another schedule_wakeup call in this turn set the wake-up first; call it once';
        if (err instanceof ConfigError) return `error: ${err.message}`;
        throw err;
      }
      const { dueAt, replaced } = set;
      return [
        `wake-up set for ${dueAt!.toISOString()}`,
        replaced ? 'it replaces the earlier one' : undefined,
        args.loop ? `it repeats every ${String(args.time)} until you cancel it with time "0", at most ${REMINDER_LIMITS.maxFires} times in all` : undefined,
      ]
        .filter(Boolean)
        .join('; ');
    },
  };
}
