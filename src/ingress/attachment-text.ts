import type { Attachment, InboundEvent } from '#src/connector.ts';
import type { ChatMessage } from '#src/llm/types.ts';
import { userMessageText } from './routing.ts';

/** An attachment as the transcript keeps it, with where its download stands. */
export interface StoredAttachment extends Attachment {
  /** Set while the file is being fetched, with an id of its own and the database session of the process fetching it. */
  download?: 'pending';
  downloadId?: string;
  downloader?: string;
  /** Why the file is not in the workspace. */
  notDownloaded?: string;
}

type UserMessage = Extract<ChatMessage, { role: 'user' }>;

/** The line the model reads for an attachment: what it is, and where it was saved (or why it was not). */
export function attachmentLine(a: StoredAttachment): string {
  const state = a.path
    ? `saved at ${a.path}`
    : a.download === 'pending'
      ? 'downloading'
      : a.notDownloaded
        ? `not downloaded: ${a.notDownloaded}`
        : 'not downloaded';
  const details = [a.name, a.mimeType, a.size !== undefined ? `${a.size} bytes` : undefined, state].filter(Boolean).join(', ');
  return `[attachment: ${a.type} (${details})]`;
}

/** The stored user message for an inbound event: its text, then one line per attachment. */
export function inboundUserMessage(event: InboundEvent, attachments: readonly StoredAttachment[]): UserMessage {
  const text = userMessageText(event);
  if (attachments.length === 0) return { role: 'user', content: text };
  return { role: 'user', content: [text, ...attachments.map(attachmentLine)].join('\n'), attachments: attachments as UserMessage['attachments'] };
}

export function storedAttachments(message: ChatMessage): StoredAttachment[] {
  return message.role === 'user' ? ((message.attachments ?? []) as StoredAttachment[]) : [];
}

/** The message with new attachment entries, its attachment lines rewritten to match. */
export function withAttachments(message: UserMessage, attachments: readonly StoredAttachment[]): UserMessage {
  const before = storedAttachments(message);
  const oldLines = before.map(attachmentLine).join('\n');
  const text = before.length && message.content.endsWith(oldLines) ? message.content.slice(0, -oldLines.length).replace(/\n$/, '') : message.content;
  return { ...message, content: [text, ...attachments.map(attachmentLine)].join('\n'), attachments: attachments as UserMessage['attachments'] };
}
