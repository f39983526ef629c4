import { randomUUID } from 'node:crypto';
import { CronExpressionParser } from 'cron-parser';
import { sql } from 'drizzle-orm';
import type { Logger } from 'pino';
import { ConfigError } from '#src/config/errors.ts';
import { isPersonaChat, loadSchedules, type Persona, type ScheduleEntry } from '#src/config/persona.ts';
import { editSchedules } from '#src/config/schedules-file.ts';
import type { Database } from '#src/db/client.ts';
import { isSchedulePaused, pausedSchedules, pauseSchedules, resumeSchedules } from '#src/db/reminders.ts';
import type { ScheduleView, SchedulingApi } from '#src/tools/types.ts';
import type { JobSystem } from './boss.ts';
import { QUEUES, type CronJobData } from './queues.ts';
import { watchScheduleFiles } from './schedule-watch.ts';
import { stableUuid } from './stable-uuid.ts';
import { turnStillQueued } from './waiting-turns.ts';
import { cronConversationId, heartbeatConversationId } from '#src/conversation-id.ts';
import type { TurnKind } from '#src/turns.ts';

export type Schedules = ReturnType<typeof createSchedules>;

export interface SchedulesDeps {
  database: Database;
  jobs: JobSystem;
  personas: () => readonly Persona[];
  timezone: string;
  log: Logger;
  /** Connectors that run somewhere in this deployment (a schedule's `deliver` must name one). */
  knownConnectors: () => string[];
}

/**
 * The heartbeat and cron entries of `schedules.jsonc`: pg-boss schedules in PARLOR_TIMEZONE, kept matching the
 * files, and the turn each occurrence starts.
 */
export function createSchedules(deps: SchedulesDeps) {
  const { db } = deps.database;
  const { boss } = deps.jobs;
  const { log } = deps;
  let watcher: { stop(): void } | undefined;

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

  /** The schedules a turn's tools list, change, run and pause: its persona's. */
  function forPersona(
    persona: Persona,
  ): Pick<SchedulingApi, 'addSchedule' | 'updateSchedule' | 'removeSchedule' | 'runNow' | 'pause' | 'resume'> & { list(): Promise<ScheduleView[]> } {
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
      async list() {
        const paused = await pausedSchedules(db, persona.name);
        return currentSchedules(persona).map((e) => view(e, paused));
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

  return {
    forPersona,
    currentSchedules,
    syncSchedules,
    async startWorker() {
      await boss.work<CronJobData>(QUEUES.cron, { batchSize: 10, pollingIntervalSeconds: 2 }, async (jobs) => {
        for (const job of jobs) await fireSchedule(job);
      });
    },
    /** Follows edits of the personas' `schedules.jsonc` files, by hand or otherwise. */
    watchFiles() {
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
    },
    stopWatching() {
      watcher?.stop();
    },
    async stop() {
      await boss.offWork(QUEUES.cron, { wait: true }).catch(() => {});
    },
  };
}

/** A cron job missed while Parlor was down runs once when it is back; a missed heartbeat is simply skipped. */
function missedPolicy(entry: ScheduleEntry): 'once' | 'skip' {
  return entry.type === 'cron' ? 'once' : 'skip';
}
