// Files people send: saved where the core asks, after the message is stored (the core starts the download).
import { randomBytes } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { Routes, type REST } from 'discord.js';
import type { Attachment } from '#src/connector.ts';

const DOWNLOAD_TIMEOUT_MS = 5 * 60_000;

/**
 * Saves an attachment (`fileId`: channel/message/attachment) into `directory`. Discord's file URLs are signed and
 * expire, so the message is read again for a fresh one.
 */
export async function downloadAttachment(rest: REST, attachment: Attachment, directory: string, stop: AbortSignal): Promise<string> {
  const [channelId, messageId, attachmentId] = (attachment.fileId ?? '').split('/');
  if (!channelId || !messageId || !attachmentId) throw new Error(`not a Discord attachment: ${attachment.fileId}`);
  const message = (await rest.get(Routes.channelMessage(channelId, messageId))) as { attachments?: { id: string; url: string; filename: string }[] };
  const file = message.attachments?.find((a) => a.id === attachmentId);
  if (!file) throw new Error('the attachment is gone from its message');
  const signal = AbortSignal.any([stop, AbortSignal.timeout(DOWNLOAD_TIMEOUT_MS)]);
  const response = await fetch(file.url, { signal });
  if (!response.ok || !response.body) throw new Error(`file download answered HTTP ${response.status}`);
  await fs.mkdir(directory, { recursive: true });
  const target = path.join(directory, uploadName(attachment.name ?? file.filename, attachmentId));
  // Streamed to a hidden name, then renamed: a half-written file never looks like a finished one.
  const partial = path.join(directory, `.${path.basename(target)}.${randomBytes(4).toString('hex')}.part`);
  try {
    await pipeline(Readable.fromWeb(response.body as never), createWriteStream(partial), { signal });
    await fs.rename(partial, target);
  } catch (err) {
    await fs.rm(partial, { force: true });
    throw err;
  }
  return target;
}

/** A safe, unique file name: the sender's name for it plus the end of the attachment's id. */
function uploadName(name: string, attachmentId: string): string {
  const original = path.basename(name).replace(/[^\w.-]+/g, '_') || 'file';
  const ext = path.extname(original);
  return `${path.basename(original, ext).slice(0, 60)}-${attachmentId.slice(-8)}${ext}`;
}
