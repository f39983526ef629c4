// Files people send: saved where the core asks, after the message is stored (the core starts the download).
import path from 'node:path';
import { Routes, type REST } from 'discord.js';
import type { Attachment } from '#src/connector.ts';
import { saveDownload } from '../shared/download.ts';


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
  return saveDownload(file.url, { directory, name: uploadName(attachment.name ?? file.filename, attachmentId) }, stop);
}

/** A safe, unique file name: the sender's name for it plus the end of the attachment's id. */
function uploadName(name: string, attachmentId: string): string {
  const original = path.basename(name).replace(/[^\w.-]+/g, '_') || 'file';
  const ext = path.extname(original);
  return `${path.basename(original, ext).slice(0, 60)}-${attachmentId.slice(-8)}${ext}`;
}
