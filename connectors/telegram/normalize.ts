import type { Chat, Message, Update, User } from 'grammy/types';
import type { Attachment, InboundEvent } from '#src/connector.ts';

export interface BotIdentity {
  id: number;
  username: string;
}

/** A Telegram update as Parlor's InboundEvent; undefined for updates Parlor does not act on. */
export function normalizeUpdate(update: Update, bot: BotIdentity): InboundEvent | undefined {
  const externalId = String(update.update_id);
  if (update.callback_query) {
    const query = update.callback_query;
    // Without `message` (a button on an inline-mode message), the click still counts: it is placed in the
    // clicker's private chat, and the core finds the question by the button's payload.
    const message = query.message;
    return {
      connector: 'telegram',
      externalId,
      kind: 'click',
      chat: message ? chatOf(message.chat) : { id: String(query.from.id), type: 'dm' },
      sender: senderOf(query.from),
      text: '',
      messageId: message ? String(message.message_id) : undefined,
      data: query.data ?? '',
    };
  }
  if (update.message_reaction) {
    const reaction = update.message_reaction;
    const emoji = reaction.new_reaction.flatMap((r) => (r.type === 'emoji' ? [r.emoji] : []));
    if (!reaction.user || emoji.length === 0) return undefined; // removed, anonymous or custom-only
    return {
      connector: 'telegram',
      externalId,
      kind: 'reaction',
      chat: chatOf(reaction.chat),
      sender: senderOf(reaction.user),
      text: emoji.join(''),
      messageId: String(reaction.message_id),
    };
  }
  const message = update.message ?? update.edited_message;
  if (!message || !message.from) return undefined;
  const addressed = commandAddressee(message);
  // A command addressed to another bot (`/status@other_bot`) is that bot's; one addressed to this bot loses the
  // suffix, so the core reads a plain `/status`.
  if (addressed && addressed.toLowerCase() !== bot.username.toLowerCase()) return undefined;
  const raw = message.text ?? message.caption ?? '';
  const text = addressed ? raw.replace(/^(\/\w+)@\w+/, '$1') : raw;
  const attachments = attachmentsOf(message);
  if (!text && attachments.length === 0) return undefined;
  const group = message.chat.type !== 'private';
  return {
    connector: 'telegram',
    externalId,
    kind: update.edited_message ? 'edit' : 'message',
    chat: {
      ...chatOf(message.chat),
      // Forum topics are conversations of their own; replies go back into the topic.
      thread: message.is_topic_message && message.message_thread_id ? String(message.message_thread_id) : undefined,
      title: 'title' in message.chat ? message.chat.title : undefined,
    },
    sender: senderOf(message.from),
    text,
    messageId: String(message.message_id),
    mentioned: group ? mentionsBot(message, bot) : undefined,
    replyToBot: message.reply_to_message?.from?.id === bot.id,
    attachments: attachments.length ? attachments : undefined,
  };
}

function chatOf(chat: Chat): InboundEvent['chat'] {
  return { id: String(chat.id), type: chat.type === 'private' ? 'dm' : 'group' };
}

function senderOf(user: User): InboundEvent['sender'] {
  return { id: String(user.id), name: [user.first_name, user.last_name].filter(Boolean).join(' '), username: user.username, isBot: user.is_bot };
}

/** The bot a leading command names (`/cmd@name`), if it names one. */
function commandAddressee(message: Message): string | undefined {
  const text = message.text ?? message.caption ?? '';
  const first = (message.entities ?? message.caption_entities ?? []).find((e) => e.type === 'bot_command' && e.offset === 0);
  if (!first) return undefined;
  return /^\/\w+@(\w+)$/.exec(text.slice(0, first.length))?.[1];
}

/** A mention entity naming the bot, a text mention of it, or a command addressed to it; never a substring. */
export function mentionsBot(message: Message, bot: BotIdentity): boolean {
  const text = message.text ?? message.caption ?? '';
  const entities = message.entities ?? message.caption_entities ?? [];
  const handle = `@${bot.username}`.toLowerCase();
  return entities.some((e) => {
    const part = text.slice(e.offset, e.offset + e.length).toLowerCase();
    if (e.type === 'mention') return part === handle;
    if (e.type === 'text_mention') return e.user?.id === bot.id;
    if (e.type === 'bot_command') return part.endsWith(handle);
    return false;
  });
}

function attachmentsOf(message: Message): Attachment[] {
  const out: Attachment[] = [];
  if (message.photo?.length) {
    const largest = message.photo[message.photo.length - 1];
    out.push({ type: 'photo', fileId: largest.file_id, size: largest.file_size });
  }
  if (message.document) {
    out.push({ type: 'document', fileId: message.document.file_id, name: message.document.file_name, size: message.document.file_size, mimeType: message.document.mime_type });
  }
  if (message.voice) out.push({ type: 'voice', fileId: message.voice.file_id, size: message.voice.file_size, mimeType: message.voice.mime_type });
  if (message.audio) out.push({ type: 'audio', fileId: message.audio.file_id, name: message.audio.file_name, size: message.audio.file_size, mimeType: message.audio.mime_type });
  if (message.video) out.push({ type: 'video', fileId: message.video.file_id, name: message.video.file_name, size: message.video.file_size, mimeType: message.video.mime_type });
  return out;
}
