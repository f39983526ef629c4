import { randomUUID } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Logger } from 'pino';
import type { Connector } from '#src/connector.ts';
import type { Persona } from '#src/config/persona.ts';
import type { Database } from '#src/db/client.ts';
import { liveSessions, lockMessage, lockMessageWithDownload, messagesWithPendingDownloads, replaceMessageContent } from '#src/db/message-attachments.ts';
import { sleep } from '#src/retry.ts';
import { placeWorkspaceFile, removeWorkspaceFile, workspaceFolderBytes, WorkspacePathError } from '#src/tools/workspace-io.ts';
import { storedAttachments, withAttachments, type StoredAttachment } from './attachment-text.ts';

export const DEFAULT_MAX_FILE_BYTES = 20 * 1024 * 1024;
export const DEFAULT_UPLOAD_CAP_BYTES = 500 * 1024 * 1024;
/** How long a turn waits for the files of the messages it reads before it reads them without. */
export const DEFAULT_DOWNLOAD_WAIT_MS = 120_000;
const UPLOADS = 'uploads';
const STOP_GRACE_MS = 5_000;

export const UPLOAD_SPACE_FULL = 'upload space full';

export interface DownloadOptions {
  database: Database;
  connectors?: ReadonlyMap<string, Connector>;
  log: Logger;
  /** Files larger than this are recorded but not downloaded. */
  maxFileBytes?: number;
  /** The most a persona's workspace/uploads may hold; a file that would pass it is not downloaded. */
  uploadCapBytes?: number;
  /** Downloads running at once (the rest wait their turn). */
  concurrency?: number;
}

type Outcome = { path: string } | { notDownloaded: string };

/**
 * Attachment downloads, run after the message is committed, beside the update loop and never in it: a large file
 * delays nobody's message, and a redelivered event (dropped by the dedupe) downloads nothing. Each finished
 * download rewrites its message's entry and the line the model reads.
 */
export function createAttachmentDownloads(options: DownloadOptions) {
  const { applicationName } = options.database;
  const maxFileBytes = options.maxFileBytes ?? DEFAULT_MAX_FILE_BYTES;
  const uploadCap = options.uploadCapBytes ?? DEFAULT_UPLOAD_CAP_BYTES;
  const concurrency = options.concurrency ?? 4;
  const queue: (() => Promise<void>)[] = [];
  const running = new Set<Promise<void>>();
  /** Bytes promised to downloads in flight, per persona, so concurrent ones cannot overfill the cap together. */
  const reserved = new Map<string, number>();
  let stopping = false;

  /** The entries to store with a new message: files to fetch are marked pending under this process's session. */
  function prepare(connectorId: string, attachments: readonly StoredAttachment[]): StoredAttachment[] {
    const connector = options.connectors?.get(connectorId);
    return attachments.map((a) => {
      if (!connector?.download || !a.fileId) return a;
      if ((a.size ?? 0) > maxFileBytes) return { ...a, notDownloaded: `larger than the ${Math.round(maxFileBytes / 1024 / 1024)} MB download limit` };
      return { ...a, download: 'pending', downloadId: randomUUID(), downloader: applicationName };
    });
  }

  /** Queues the pending files of a committed message. */
  function start(conversationId: string, persona: Persona, connectorId: string, attachments: readonly StoredAttachment[]): void {
    const connector = options.connectors?.get(connectorId);
    for (const attachment of attachments) {
      if (attachment.download !== 'pending' || !connector) continue;
      queue.push(() => fetchOne(conversationId, persona, connector, attachment));
    }
    pump();
  }

  function pump() {
    while (!stopping && running.size < concurrency && queue.length) {
      const job = queue.shift()!();
      const tracked: Promise<void> = job.finally(() => {
        running.delete(tracked);
        pump();
      });
      running.add(tracked);
    }
  }

  async function fetchOne(conversationId: string, persona: Persona, connector: Connector, attachment: StoredAttachment): Promise<void> {
    const log = options.log.child({ connector: connector.id, conversation: conversationId, attachment: attachment.name ?? attachment.type });
    const declared = attachment.size ?? 0;
    // The connector saves into a folder of Parlor's own, which no command can see or change; only
    // placeWorkspaceFile moves the finished file into the workspace (see workspace-io.ts for why).
    let staging: string | undefined;
    try {
      const used = (await workspaceFolderBytes(persona.workspace, UPLOADS)) + (reserved.get(persona.name) ?? 0);
      if (used + declared > uploadCap) {
        log.warn({ persona: persona.name, used, size: declared, cap: uploadCap }, 'attachment not downloaded: the persona\'s upload space is full');
        await settle(conversationId, attachment.downloadId!, { notDownloaded: UPLOAD_SPACE_FULL });
        return;
      }
      reserved.set(persona.name, (reserved.get(persona.name) ?? 0) + declared);
      let saved: string;
      try {
        staging = await fs.mkdtemp(path.join(os.tmpdir(), 'parlor-download-'));
        const staged = await connector.download!(attachment, staging);
        if (path.dirname(staged) !== staging) throw new Error(`the connector saved the file outside the folder it was given (${staged})`);
        const actual = (await fs.stat(staged)).size;
        // A size the platform did not declare (or declared wrong) is checked once the file is here.
        if (used + actual > uploadCap) {
          log.warn({ persona: persona.name, used, size: actual, cap: uploadCap }, 'attachment removed: the persona\'s upload space is full');
          await settle(conversationId, attachment.downloadId!, { notDownloaded: UPLOAD_SPACE_FULL });
          return;
        }
        saved = await placeWorkspaceFile(persona.workspace, UPLOADS, path.basename(staged), staged);
      } finally {
        reserved.set(persona.name, (reserved.get(persona.name) ?? 0) - declared);
      }
      const recorded = await settle(conversationId, attachment.downloadId!, { path: saved });
      // The turn reading the message gave up waiting and told the model the file is not there: keep it so.
      if (!recorded) await removeWorkspaceFile(persona.workspace, saved);
      else log.debug({ path: saved }, 'attachment downloaded');
    } catch (err) {
      // Cut off by shutdown: left pending, so the turn reading it sees this process gone and says so.
      if (stopping) return;
      // The uploads folder is a symlink or a file (a command made it so): the model reads why, and can mend it.
      const reason = err instanceof WorkspacePathError ? err.message : 'the download failed';
      log.warn({ err, persona: persona.name }, 'attachment could not be downloaded');
      await settle(conversationId, attachment.downloadId!, { notDownloaded: reason }).catch((e: unknown) =>
        log.warn({ err: e }, 'attachment state could not be recorded'),
      );
    } finally {
      if (staging) await fs.rm(staging, { recursive: true, force: true }).catch(() => {});
    }
  }

  /** Records how a download ended; false when the message no longer waits for it. */
  function settle(conversationId: string, downloadId: string, outcome: Outcome): Promise<boolean> {
    return settleDownload(options.database.db, conversationId, downloadId, outcome);
  }

  return {
    prepare,
    start,
    /** Starts nothing more, and gives running downloads a moment to finish; the rest are settled by the turn. */
    async stop(): Promise<void> {
      stopping = true;
      queue.length = 0;
      await Promise.race([Promise.allSettled(running), sleep(STOP_GRACE_MS)]);
    },
  };
}

export type AttachmentDownloads = ReturnType<typeof createAttachmentDownloads>;

async function settleDownload(db: Database['db'], conversationId: string, downloadId: string, outcome: Outcome): Promise<boolean> {
  // A message being read mid-turn moves to a new row while we wait for its lock: look again.
  for (let attempt = 0; attempt < 3; attempt++) {
    const result = await db.transaction(async (tx) => {
      const row = await lockMessageWithDownload(tx, conversationId, downloadId);
      if (!row || row.content.role !== 'user') return undefined;
      const attachments = storedAttachments(row.content);
      const index = attachments.findIndex((a) => a.downloadId === downloadId);
      if (index < 0) return undefined;
      if (attachments[index].download !== 'pending') return false;
      const next = attachments.map((a, i) => (i === index ? finished(a, outcome) : a));
      await replaceMessageContent(tx, row.id, withAttachments(row.content, next));
      return true;
    });
    if (result !== undefined) return result;
  }
  return false;
}

function finished(attachment: StoredAttachment, outcome: Outcome): StoredAttachment {
  const { download: _download, downloader: _downloader, ...rest } = attachment;
  return { ...rest, ...outcome };
}

/**
 * Resolves once no message claimed by `turnId` (or still waiting in the conversation) has a download in progress.
 * A download whose process is gone (a crash after the commit) is marked "not downloaded" at once; one still
 * running after `timeoutMs` is marked so too, and the model reads the message without its file.
 */
export async function awaitAttachmentDownloads(
  db: Database['db'],
  conversationId: string,
  turnId: string,
  timeoutMs = DEFAULT_DOWNLOAD_WAIT_MS,
  signal?: AbortSignal,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    // A stopped turn reads nothing; the messages wait for the next one.
    if (signal?.aborted) return;
    const rows = await messagesWithPendingDownloads(db, conversationId, turnId);
    if (rows.length === 0) return;
    const pending = rows.flatMap((r) => storedAttachments(r.content).filter((a) => a.download === 'pending'));
    const alive = await liveSessions(db, [...new Set(pending.map((a) => a.downloader ?? ''))]);
    const givingUp = Date.now() >= deadline;
    let waiting = false;
    for (const row of rows) {
      const reasons = new Map<string, string>();
      for (const a of storedAttachments(row.content)) {
        if (a.download !== 'pending') continue;
        if (!a.downloader || !alive.has(a.downloader)) reasons.set(a.downloadId ?? '', 'the download was interrupted');
        else if (givingUp) reasons.set(a.downloadId ?? '', 'the download took too long');
        else waiting = true;
      }
      if (reasons.size) await giveUp(db, row.id, reasons);
    }
    if (!waiting) return;
    await sleep(Math.min(200, Math.max(0, deadline - Date.now())), signal);
  }
}

async function giveUp(db: Database['db'], messageId: number, reasons: Map<string, string>): Promise<void> {
  await db.transaction(async (tx) => {
    const content = await lockMessage(tx, messageId);
    // Moved (read mid-turn) or gone: the next look finds it under its new id.
    if (!content || content.role !== 'user') return;
    const attachments = storedAttachments(content);
    let changed = false;
    const next = attachments.map((a) => {
      const reason = a.download === 'pending' ? reasons.get(a.downloadId ?? '') : undefined;
      if (!reason) return a;
      changed = true;
      return finished(a, { notDownloaded: reason });
    });
    if (changed) await replaceMessageContent(tx, messageId, withAttachments(content, next));
  });
}
