// Events a connector acknowledged before the core could store them (Slack's 3 s deadline passed while Postgres was
// away; a Discord gateway event, which is never sent again, that could not be stored at once), kept on this machine's
// disk until they are: a process killed meanwhile would otherwise lose them. Each is a file of its own, written whole
// and synced before the acknowledgement goes; what is left is stored at the next start, and by a running process once
// its own tries have given up (the ingress dedupe keeps each event once).
import { createHash } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import type { Logger } from 'pino';
import type { EventKeeper, InboundEvent, InboundHandler } from '#src/connector.ts';

/**
 * While a process runs, held events are looked for this often, and tried once they are older than their keepers'
 * own tries last (ten minutes, see connectors/shared/ack.ts and connectors/discord/store.ts).
 */
export const HELD_REPLAY = { everyMs: 60_000, olderThanMs: 11 * 60_000 };

/** A partial file older than this was left by a write that never finished. */
const PARTIAL_AGE_MS = 60_000;

export interface HeldEvents extends EventKeeper {
  /**
   * Hands every held event to `handle`, dropping each it stored (or found unreadable); what fails stays for the next
   * try. With `olderThanMs`, only events kept at least that long ago (younger ones are still being tried by their keeper).
   */
  replay(handle: InboundHandler, options?: { olderThanMs?: number }): Promise<{ stored: number; left: number }>;
}

/** The file of one event: the same for every delivery of it, so a redelivery held again replaces it. */
function fileName(event: InboundEvent): string {
  const digest = createHash('sha256').update(`${event.connector}\0${event.externalId}`).digest('hex').slice(0, 32);
  return `${event.connector.replace(/[^a-z0-9-]/gi, '_')}-${digest}.json`;
}

export function createHeldEvents(options: { directory: string; log: Logger }): HeldEvents {
  const { directory, log } = options;

  async function syncDirectory() {
    const handle = await fs.open(directory, 'r');
    try {
      await handle.sync();
    } finally {
      await handle.close();
    }
  }

  return {
    async keep(event) {
      await fs.mkdir(directory, { recursive: true, mode: 0o700 });
      const file = path.join(directory, fileName(event));
      const release = async () => {
        await fs.rm(file, { force: true }).catch((err: unknown) => log.warn({ err, file }, 'a held event, now stored, could not be removed'));
      };
      // Kept already (a redelivery, or Slack's message and app_mention of one post): written again, in its place
      // among the chat's events (its first time, which replay orders by).
      const earlier = await fs.stat(file).catch(() => undefined);
      const partial = `${file}.${process.pid}.partial`;
      const handle = await fs.open(partial, 'w', 0o600);
      try {
        await handle.writeFile(JSON.stringify({ heldAt: new Date().toISOString(), event }));
        await handle.sync();
      } finally {
        await handle.close();
      }
      await fs.rename(partial, file);
      if (earlier) await fs.utimes(file, earlier.atime, earlier.mtime).catch(() => {});
      await syncDirectory();
      return release;
    },

    async replay(handle, { olderThanMs = 0 } = {}) {
      const names = await fs.readdir(directory).catch((err: NodeJS.ErrnoException) => {
        if (err.code === 'ENOENT') return [] as string[];
        throw err;
      });
      let stored = 0;
      let left = 0;
      // In the order they were kept (a file is written once, as its event came): a chat's events stay in order.
      const kept: { file: string; at: number }[] = [];
      for (const name of names.filter((n) => n.endsWith('.json'))) {
        const file = path.join(directory, name);
        const stat = await fs.stat(file).catch(() => undefined);
        if (stat && (olderThanMs <= 0 || Date.now() - stat.mtimeMs >= olderThanMs)) kept.push({ file, at: stat.mtimeMs });
      }
      kept.sort((a, b) => a.at - b.at || a.file.localeCompare(b.file));
      // A chat whose event could not be stored yet stores none of its later ones before it: they wait for the next try.
      const waiting = new Set<string>();
      const chatOf = (event: InboundEvent) => `${event.connector}\0${event.chat?.id}\0${event.chat?.thread ?? ''}`;
      for (const { file } of kept) {
        let event: InboundEvent;
        try {
          event = (JSON.parse(await fs.readFile(file, 'utf8')) as { event: InboundEvent }).event;
          if (typeof event?.connector !== 'string' || typeof event.externalId !== 'string') throw new Error('not an event');
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code === 'ENOENT') continue; // Another process stored it.
          log.error({ err, file }, 'a held event could not be read; it is dropped');
          await fs.rm(file, { force: true });
          continue;
        }
        if (waiting.has(chatOf(event))) {
          left++;
          continue;
        }
        try {
          const result = await handle(event);
          log.info({ connector: event.connector, event: event.externalId, status: result.status }, 'an event acknowledged before it was stored is stored now');
          await fs.rm(file, { force: true });
          stored++;
        } catch (err) {
          log.warn({ err, connector: event.connector, event: event.externalId }, 'a held event could not be stored yet; it is kept for the next try');
          waiting.add(chatOf(event));
          left++;
        }
      }
      // Leftovers of a write a kill cut short (their event was never acknowledged, so the platform still has it);
      // a recent one may be another process's, still being written.
      for (const name of names.filter((n) => n.endsWith('.partial'))) {
        const file = path.join(directory, name);
        const stat = await fs.stat(file).catch(() => undefined);
        if (stat && Date.now() - stat.mtimeMs > PARTIAL_AGE_MS) await fs.rm(file, { force: true });
      }
      if (left) log.warn({ stored, left }, 'some events kept on disk could not be stored; they are tried again later');
      return { stored, left };
    },
  };
}
