import { DateTime } from '#src/luxon.ts';
import { isPersonaPerson, type ScheduleEntry } from '#src/config/persona.ts';
import { scheduleEntryProperties } from '#src/config/persona-schemas.ts';
import { DuplicateReminderName } from '#src/db/reminders.ts';
import { REMINDER_LIMITS, TooManyReminders } from '#src/jobs/reminders.ts';
import { explicitTarget } from '#src/tools/targets.ts';
import type { ReminderView, ScheduleView, SchedulingApi, Tool, ToolContext } from '#src/tools/types.ts';
import type { DeliveryTarget } from '#src/turns.ts';

type Action = 'list' | 'add' | 'update' | 'remove' | 'run_now' | 'remind' | 'cancel_reminder' | 'pause' | 'resume';

interface Args {
  action: Action;
  name?: string;
  prompt?: string;
  at?: string;
  in_seconds?: number;
  every_seconds?: number;
  until?: string;
  deliver_connector?: string;
  deliver_to?: string;
  type?: 'heartbeat' | 'cron';
  cron?: string;
  fresh?: boolean;
  enabled?: boolean;
  deliver?: { connector: string; to: string; thread?: string } | null;
}

/** A time this far in the past still counts as now (the model's clock and ours differ a little). */
const PAST_GRACE_MS = 5000;
const TEN_YEARS_SECONDS = 10 * 365 * 24 * 3600;
const MAX_AHEAD_MS = TEN_YEARS_SECONDS * 1000;
/** What each action cannot do without. */
const REQUIRED: Partial<Record<Action, (keyof Args)[]>> = {
  cancel_reminder: ['name'],
  add: ['name', 'type', 'cron', 'prompt'],
  update: ['name'],
  remove: ['name'],
  run_now: ['name'],
};
/** Actions that change the persona's standing work: in a group, only its own people may take them. */
const OWNER_ACTIONS: readonly Action[] = ['add', 'update', 'remove', 'run_now', 'pause', 'resume'];
const NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]*$/;

/**
 * Reminders (one-shot or recurring turns at a time) and the persona's `schedules.jsonc` entries (heartbeat and
 * cron), in one tool. Naive times are in the schedule time zone.
 */
export function createRemindTool(deps: { timezone: string }): Tool<Args> {
  return {
    name: 'remind',
    description:
      'Reminders and schedules. action "remind": a reminder turn at `at` (ISO 8601; without an offset it is in ' +
      `${deps.timezone}) or in \`in_seconds\`, optionally every \`every_seconds\` (at least ${REMINDER_LIMITS.minEverySeconds}, at most ${REMINDER_LIMITS.maxFires} times) until \`until\`; ` +
      '`prompt` is what you will be told then; ' +
      '`name` is optional (one is made from the prompt); deliver_connector + deliver_to send the result elsewhere. ' +
      '"cancel_reminder" {name}. "list": schedules and pending reminders with their next time. ' +
      '"add" {name, type: heartbeat|cron, cron: 5 fields, prompt, fresh?, deliver?}, "update" {name, ...fields}, "remove" {name}, ' +
      '"run_now" {name}: your schedules.jsonc entries, live without a restart. "pause"/"resume" {name?}: hold or release heartbeat and cron runs.',
    parameters: {
      type: 'object',
      additionalProperties: false,
      required: ['action'],
      properties: {
        action: { enum: ['list', 'add', 'update', 'remove', 'run_now', 'remind', 'cancel_reminder', 'pause', 'resume'] },
        name: { type: 'string', minLength: 1, maxLength: 80 },
        prompt: { type: 'string', minLength: 1, maxLength: 4000 },
        at: { type: 'string', minLength: 1 },
        in_seconds: { type: 'number', minimum: 0, maximum: TEN_YEARS_SECONDS },
        every_seconds: { type: 'integer', minimum: 1, maximum: TEN_YEARS_SECONDS },
        until: { type: 'string', minLength: 1 },
        deliver_connector: { type: 'string', minLength: 1 },
        deliver_to: { type: 'string', minLength: 1 },
        type: scheduleEntryProperties.type,
        cron: scheduleEntryProperties.cron,
        fresh: scheduleEntryProperties.fresh,
        enabled: scheduleEntryProperties.enabled,
        // null (in update) goes back to the default: the primary.
        deliver: { anyOf: [scheduleEntryProperties.deliver, { type: 'null' }] },
      },
    },
    // A reminder is keyed by the call that set it: a turn resumed after a crash sets it again to no effect.
    resumable: (args) => args.action === 'remind' || args.action === 'list',
    async run(args, ctx) {
      const scheduling = ctx.scheduling;
      if (!scheduling) return 'error: scheduling is not available here';
      try {
        return await act(args, ctx, scheduling, deps.timezone);
      } catch (err) {
        // Configuration problems (a bad cron expression, a duplicate name) are the model's to fix.
        if (err instanceof Error && (err.name === 'ConfigError' || err instanceof DuplicateReminderName)) return `error: ${err.message}`;
        if (err instanceof TooManyReminders) return `error: ${err.message}; cancel_reminder one you no longer need first (list shows them)`;
        throw err;
      }
    },
  };
}

async function act(args: Args, ctx: ToolContext, scheduling: SchedulingApi, timezone: string): Promise<string> {
  // Someone in a group who is not one of the persona's own people: they may talk to it, and set one-time reminders.
  const outsider = ctx.origin?.chatType === 'group' && !isPersonaPerson(ctx.persona, ctx.origin.sender);
  if (outsider && OWNER_ACTIONS.includes(args.action)) {
    return `error: only the persona's own users can ${args.action.replace('_', ' ')} its schedules; ask them`;
  }
  if (outsider && args.action === 'remind' && args.every_seconds !== undefined) {
    return "error: only the persona's own users can set repeating reminders here; a one-time reminder (without every_seconds) is fine";
  }
  const absent = (REQUIRED[args.action] ?? []).find((field) => args[field] === undefined);
  if (absent) return `error: ${args.action} needs ${absent}`;
  switch (args.action) {
    case 'list':
      return describeList(await scheduling.list(), timezone);
    case 'remind':
      return addReminder(args, ctx, scheduling, timezone);
    case 'cancel_reminder': {
      // Wake-ups (named wakeup:<conversation>) belong to their conversations: schedule_wakeup "0" cancels this one's.
      const cancelled = NAME.test(args.name!) && (await scheduling.cancelReminder(args.name!));
      return cancelled ? `reminder "${args.name}" cancelled` : `error: there is no pending reminder named "${args.name}"`;
    }
    case 'add': {
      const entry: ScheduleEntry = {
        name: args.name!,
        type: args.type!,
        cron: args.cron!,
        prompt: args.prompt!,
        ...(args.fresh !== undefined ? { fresh: args.fresh } : {}),
        ...(args.enabled !== undefined ? { enabled: args.enabled } : {}),
        ...(args.deliver ? { deliver: args.deliver } : {}),
      };
      return `added: ${describeSchedule(await scheduling.addSchedule(entry), timezone)}`;
    }
    case 'update': {
      const patch: Partial<ScheduleEntry> = {};
      if (args.type) patch.type = args.type;
      if (args.cron) patch.cron = args.cron;
      if (args.prompt) patch.prompt = args.prompt;
      if (args.fresh !== undefined) patch.fresh = args.fresh;
      if (args.enabled !== undefined) patch.enabled = args.enabled;
      if (args.deliver !== undefined) patch.deliver = args.deliver ?? undefined;
      if (Object.keys(patch).length === 0) return 'error: update needs at least one of type, cron, prompt, fresh, enabled, deliver (null removes it)';
      return `updated: ${describeSchedule(await scheduling.updateSchedule(args.name!, patch), timezone)}`;
    }
    case 'remove':
      await scheduling.removeSchedule(args.name!);
      return `removed schedule "${args.name}"`;
    case 'run_now':
      await scheduling.runNow(args.name!);
      return `schedule "${args.name}" is running now, in its own turn`;
    case 'pause':
      await scheduling.pause(args.name);
      return args.name ? `schedule "${args.name}" paused` : 'all your heartbeat and cron schedules are paused';
    case 'resume':
      await scheduling.resume(args.name);
      return args.name ? `schedule "${args.name}" resumed` : 'your heartbeat and cron schedules are resumed';
  }
}

async function addReminder(args: Args, ctx: ToolContext, scheduling: SchedulingApi, timezone: string): Promise<string> {
  if (!args.prompt) return 'error: remind needs prompt (what you will be told when it fires)';
  if ((args.at === undefined) === (args.in_seconds === undefined)) return 'error: give exactly one of at (a date and time) or in_seconds';
  const now = Date.now();
  let dueAt: Date;
  if (args.at !== undefined) {
    const parsed = parseTime(args.at, timezone);
    if ('error' in parsed) return `error: at ${parsed.error}`;
    dueAt = parsed.date;
  } else {
    dueAt = new Date(now + args.in_seconds! * 1000);
  }
  if (dueAt.getTime() < now - PAST_GRACE_MS) {
    return `error: at ${dueAt.toISOString()} is in the past (it is now ${new Date(now).toISOString()}); give a future time`;
  }
  if (dueAt.getTime() < now) dueAt = new Date(now);
  if (dueAt.getTime() > now + MAX_AHEAD_MS) return `error: at ${dueAt.toISOString()} is more than 10 years ahead`;
  const floor = chainFloorMs(ctx);
  if (floor && dueAt.getTime() < now + floor) {
    return `error: ${chainReason(ctx)} a reminder is at least ${floor / 1000}s away (so reminders never chain into a turn every second)`;
  }
  if (args.every_seconds !== undefined && args.every_seconds < REMINDER_LIMITS.minEverySeconds) {
    return `error: every_seconds must be at least ${REMINDER_LIMITS.minEverySeconds} (a reminder repeats at most once a minute)`;
  }
  let until: Date | undefined;
  if (args.until !== undefined) {
    if (!args.every_seconds) return 'error: until only makes sense with every_seconds';
    const parsed = parseTime(args.until, timezone);
    if ('error' in parsed) return `error: until ${parsed.error}`;
    if (parsed.date <= dueAt) return 'error: until must be after the first time';
    until = parsed.date;
  }
  let deliver: DeliveryTarget | undefined;
  if (args.deliver_connector || args.deliver_to) {
    if (!args.deliver_connector || !args.deliver_to) return 'error: give both deliver_connector and deliver_to, or neither';
    const checked = explicitTarget(ctx, { connector: args.deliver_connector, chat: args.deliver_to });
    if ('error' in checked) return `error: ${checked.error}`;
    deliver = checked;
  }
  if (args.name !== undefined && !NAME.test(args.name)) return 'error: name may hold letters, digits, _ . and -, and starts with a letter or digit';

  const request = { prompt: args.prompt, dueAt, everySeconds: args.every_seconds, until, deliver, callKey: ctx.callKey };
  let view: ReminderView;
  if (args.name !== undefined) {
    try {
      view = await scheduling.remind({ ...request, name: args.name });
    } catch (err) {
      if (err instanceof DuplicateReminderName) return `error: ${err.message}; pick another name, or cancel_reminder it first`;
      throw err;
    }
  } else {
    // A name made from the prompt; a number is added while it is taken.
    const base = nameFrom(args.prompt);
    for (let i = 1; ; i++) {
      try {
        view = await scheduling.remind({ ...request, name: i === 1 ? base : `${base}-${i}` });
        break;
      } catch (err) {
        if (!(err instanceof DuplicateReminderName) || i >= 50) throw err;
      }
    }
  }
  return `reminder "${view.name}" set: ${describeReminder(view, timezone)}`;
}

/** ISO 8601; a time without an offset is in the schedule time zone. */
function parseTime(text: string, timezone: string): { date: Date } | { error: string } {
  const parsed = DateTime.fromISO(text.trim(), { zone: timezone, setZone: true });
  if (!parsed.isValid) return { error: `"${text}" is not an ISO 8601 time (e.g. "2026-12-01T09:00" or "2026-12-01T09:00:00+01:00")` };
  return { date: parsed.toJSDate() };
}

function nameFrom(prompt: string): string {
  const words = prompt
    .toLowerCase()
    .normalize('NFKD')
    .replace(/[^a-z0-9\s-]/g, ' ')
    .split(/\s+/)
    .filter((w) => w && !['remind', 'me', 'to', 'the', 'a', 'an', 'please', 'that', 'i', 'should'].includes(w));
  return words.slice(0, 4).join('-').slice(0, 40).replace(/-+$/, '') || 'reminder';
}

function local(iso: string, timezone: string): string {
  return DateTime.fromISO(iso).setZone(timezone).toFormat("yyyy-LL-dd HH:mm:ss ZZZZ");
}

function describeReminder(r: ReminderView, timezone: string): string {
  const parts = [`next at ${local(r.dueAt, timezone)}`];
  if (r.everySeconds) {
    // A repeat ends at its until or at its limit of firings, whichever comes first.
    const lastAt = new Date(Date.parse(r.dueAt) + (REMINDER_LIMITS.maxFires - r.fires - 1) * r.everySeconds * 1000);
    const end =
      r.until && Date.parse(r.until) <= lastAt.getTime()
        ? ` until ${local(r.until, timezone)}`
        : `, at most ${REMINDER_LIMITS.maxFires} times in all (the last at ${local(lastAt.toISOString(), timezone)})`;
    parts.push(`every ${r.everySeconds}s${end}`);
  }
  if (r.deliver) parts.push(`delivered to ${r.deliver.connector}:${r.deliver.chat}`);
  return `${parts.join(', ')} — "${r.prompt}"`;
}

function describeSchedule(s: ScheduleView, timezone: string): string {
  const state = s.enabled === false ? 'disabled' : s.paused ? 'paused' : s.nextRun ? `next at ${local(s.nextRun, timezone)}` : '';
  return `${s.name} (${s.type}, "${s.cron}"${s.fresh ? ', fresh' : ''}${state ? `, ${state}` : ''}) — "${s.prompt}"`;
}

function describeList(list: { schedules: ScheduleView[]; reminders: ReminderView[]; onlyOwn?: boolean }, timezone: string): string {
  if (list.onlyOwn) {
    const own = list.reminders.filter((r) => r.kind === 'reminder');
    return [
      "Reminders this person set (the persona's schedules and other reminders are for its own users to see):",
      ...(own.length ? own.map((r) => `- ${r.name}: ${describeReminder(r, timezone)}`) : ['- none']),
    ].join('\n');
  }
  const lines = [`Schedules (${timezone}):`];
  lines.push(...(list.schedules.length ? list.schedules.map((s) => `- ${describeSchedule(s, timezone)}`) : ['- none']));
  lines.push('Pending reminders:');
  const reminders = list.reminders.filter((r) => r.kind === 'reminder');
  lines.push(...(reminders.length ? reminders.map((r) => `- ${r.name}: ${describeReminder(r, timezone)}`) : ['- none']));
  const wakeups = list.reminders.filter((r) => r.kind === 'wakeup');
  if (wakeups.length) lines.push('Wake-ups:', ...wakeups.map((r) => `- ${describeReminder(r, timezone)}`));
  return lines.join('\n');
}

/**
 * A scheduled turn that sets the next one, or someone who is not one of the persona's people, could chain one-shot
 * reminders and wake-ups into a turn every second: for them the next one is at least the repeat floor away.
 */
export function chainFloorMs(ctx: Pick<ToolContext, 'kind' | 'origin' | 'persona'>): number {
  const outsider = ctx.origin?.chatType === 'group' && !isPersonaPerson(ctx.persona, ctx.origin.sender);
  return ctx.kind !== 'user' || outsider ? REMINDER_LIMITS.minEverySeconds * 1000 : 0;
}

export function chainReason(ctx: Pick<ToolContext, 'kind'>): string {
  return ctx.kind !== 'user' ? 'set from a scheduled turn,' : "set by someone who is not one of the persona's users,";
}
