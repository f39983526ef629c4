// The Postgres side of background commands (src/tools/processes.ts): their rows, the one wake turn each sends its
// conversation when it ends, and the sweep that finds commands whose Parlor process died (kill -9, a crash) and
// tells their conversations, killing what such a process left running on this machine.
import type { Logger } from 'pino';
import { CHANNELS, notify } from '#src/db/channels.ts';
import type { Database } from '#src/db/client.ts';
import {
  claimLostProcesses,
  conversationProcesses,
  countRunningProcesses,
  endBackgroundProcess,
  getBackgroundProcess,
  insertBackgroundProcess,
  lockPersonaProcesses,
  removeBackgroundProcess,
  type BackgroundProcessRow,
} from '#src/db/background-processes.ts';
import type { JobSystem } from '#src/jobs/boss.ts';
import { lostText, type ProcessOwner, type ProcessRecord, type ProcessStore } from '#src/tools/processes.ts';
import type { Origin, TurnJobData } from '#src/turns.ts';

const SWEEP_MS = 60_000;

export interface BackgroundProcessStore extends ProcessStore {
  /** Tells the conversations of commands whose Parlor process is gone, once each; kills their leftovers here. */
  sweepLost(): Promise<number>;
  start(): void;
  stop(): void;
}

export function createProcessStore(deps: {
  database: Database;
  jobs: Pick<JobSystem, 'enqueueTurn'>;
  log: Logger;
  /** Kills the processes a command run outside the sandbox left, by the tag in their environment. */
  killTagged?: (tag: string) => Promise<void>;
}): BackgroundProcessStore {
  const { db } = deps.database;
  const log = deps.log.child({ module: 'processes' });
  let timer: NodeJS.Timeout | undefined;

  const wake = (owner: ProcessOwner, id: string, text: string): TurnJobData => ({
    conversationId: owner.conversationId,
    persona: owner.persona,
    kind: 'subagent',
    prompt: text,
    ...(owner.origin ? { origin: owner.origin } : {}),
    source: `process:${id}`,
  });

  const store: BackgroundProcessStore = {
    async admit(record, max) {
      return db.transaction(async (tx) => {
        await lockPersonaProcesses(tx, record.persona);
        if ((await countRunningProcesses(tx, record.persona)) >= max) return false;
        await insertBackgroundProcess(tx, {
          id: record.id,
          persona: record.persona,
          conversationId: record.conversationId,
          turnId: record.turnId,
          command: record.command,
          origin: record.origin ?? null,
          owner: deps.database.applicationName,
          tag: record.tag ?? null,
          startedAt: record.startedAt,
        });
        return true;
      });
    },
    async ended(id, end, told) {
      await db.transaction(async (tx) => {
        const row = await endBackgroundProcess(tx, id, end);
        // Ended already (the sweep took it), removed by the model, or stopped by /stop: no wake.
        if (!row || row.removedAt || !told) return;
        await deps.jobs.enqueueTurn(wake(told.owner, id, told.text), tx);
      });
    },
    async forward(request) {
      await notify(db, CHANNELS.process, JSON.stringify(request));
    },
    async removed(id) {
      await removeBackgroundProcess(db, id);
    },
    async get(id) {
      const row = await getBackgroundProcess(db, id);
      return row && toRecord(row);
    },
    async list(conversationId) {
      return (await conversationProcesses(db, conversationId)).map(toRecord);
    },
    async sweepLost() {
      const lost = await db.transaction(async (tx) => {
        const rows = await claimLostProcesses(tx);
        for (const row of rows) if (!row.removedAt) await deps.jobs.enqueueTurn(wake(toRecord(row), row.id, lostText(row)), tx);
        return rows;
      });
      for (const row of lost) if (row.tag) await deps.killTagged?.(row.tag);
      if (lost.length) log.warn({ processes: lost.map((r) => r.id) }, 'background commands lost with the Parlor process that ran them');
      return lost.length;
    },
    start() {
      const sweep = () => store.sweepLost().catch((err: unknown) => log.warn({ err }, 'looking for lost background commands failed'));
      void sweep();
      timer = setInterval(sweep, SWEEP_MS);
      timer.unref();
    },
    stop() {
      clearInterval(timer);
    },
  };
  return store;
}

function toRecord(row: BackgroundProcessRow): ProcessRecord {
  return {
    id: row.id,
    persona: row.persona,
    conversationId: row.conversationId,
    ...(row.turnId ? { turnId: row.turnId } : {}),
    ...(row.origin ? { origin: row.origin as Origin } : {}),
    command: row.command,
    state: row.state as ProcessRecord['state'],
    ...(row.exitStatus ? { exitStatus: row.exitStatus } : {}),
    ...(row.tail !== null ? { tail: row.tail } : {}),
    startedAt: row.startedAt,
    ...(row.endedAt ? { endedAt: row.endedAt } : {}),
    ...(row.removedAt ? { removed: true } : {}),
  };
}
