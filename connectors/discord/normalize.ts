// Discord events (as discord.js hands them over) as Parlor's InboundEvent; undefined for what Parlor does not act on.
import { MessageFlags, MessageType, type Channel, type Message, type MessageComponentInteraction, type MessageReaction, type User } from 'discord.js';
import type { Attachment, ChatRef, InboundEvent, Sender } from '#src/connector.ts';

export interface BotIdentity {
  id: string;
  username: string;
}

/** Where an event happened: a DM, a guild channel, or a thread (a conversation of its own under its parent channel). */
export function chatOf(channel: Channel | null | undefined, channelId: string, guildId: string | null): ChatRef {
  if (!guildId) return { id: channelId, type: 'dm' };
  if (channel?.isThread() && channel.parentId) return { id: channel.parentId, type: 'group', thread: channelId, title: channel.name };
  return { id: channelId, type: 'group', title: channel && 'name' in channel ? (channel.name ?? undefined) : undefined };
}

function senderOf(user: User, displayName?: string | null): Sender {
  return { id: user.id, name: displayName ?? user.globalName ?? user.username, username: user.username, isBot: user.bot };
}

/** People's messages only: not joins, pins, thread starts and the like. */
const PEOPLES_MESSAGES = new Set<MessageType>([MessageType.Default, MessageType.Reply]);

/**
 * A message or its edit. A leading mention of the bot is what addresses it in a channel (`@Parlor /status` is the
 * command `/status`), so it is taken off; other mentions read as names.
 */
export function normalizeMessage(message: Message, bot: BotIdentity, kind: 'message' | 'edit'): InboundEvent | undefined {
  if (!PEOPLES_MESSAGES.has(message.type) || message.system) return undefined;
  const chat = chatOf(message.channel, message.channelId, message.guildId);
  const group = chat.type === 'group';
  const text = readableText(message, bot);
  const attachments = attachmentsOf(message);
  if (!text && attachments.length === 0) return undefined;
  return {
    connector: 'discord',
    // An edit is an event of its own, once per version of the message.
    externalId: kind === 'message' ? message.id : `edit:${message.id}:${message.editedTimestamp ?? 0}`,
    kind,
    chat,
    sender: senderOf(message.author, message.member?.displayName),
    text,
    messageId: message.id,
    // The bot's id among the users mentioned: @everyone, @here and roles (the bot's own managed role too) are not it.
    mentioned: group ? message.mentions.users.has(bot.id) : undefined,
    replyToBot: message.reference?.messageId !== undefined && message.mentions.repliedUser?.id === bot.id,
    attachments: attachments.length ? attachments : undefined,
  };
}

function readableText(message: Message, bot: BotIdentity): string {
  const leading = new RegExp(`^\\s*<@!?${bot.id}>[\\s,:]*`);
  return message.content
    .replace(leading, '')
    .replace(/<@!?(\d+)>/g, (raw, id: string) => {
      if (id === bot.id) return `@${bot.username}`;
      const user = message.mentions.users.get(id);
      return user ? `@${user.username}` : raw;
    })
    .replace(/<@&(\d+)>/g, (raw, id: string) => {
      const role = message.mentions.roles.get(id);
      return role ? `@${role.name}` : raw;
    })
    .replace(/<#(\d+)>/g, (raw, id: string) => {
      const channel = message.mentions.channels.get(id);
      return channel && 'name' in channel && channel.name ? `#${channel.name}` : raw;
    })
    .trim();
}

/**
 * The message's files. `fileId` names the message and the attachment, not its URL: Discord's file URLs are signed
 * and expire, so the download asks for the message again and takes the URL it has then.
 */
function attachmentsOf(message: Message): Attachment[] {
  const voice = message.flags.has(MessageFlags.IsVoiceMessage);
  return [...message.attachments.values()].map((a) => ({
    type: voice ? 'voice' : attachmentType(a.contentType),
    name: a.name,
    size: a.size,
    mimeType: a.contentType ?? undefined,
    fileId: `${message.channelId}/${message.id}/${a.id}`,
  }));
}

function attachmentType(contentType: string | null): Attachment['type'] {
  if (contentType?.startsWith('image/')) return 'photo';
  if (contentType?.startsWith('audio/')) return 'audio';
  if (contentType?.startsWith('video/')) return 'video';
  return 'document';
}

/** A button click (the payload is its custom_id) or a choice from a menu (the payload is the option's value). */
export function normalizeClick(interaction: MessageComponentInteraction, channel: Channel | null): InboundEvent {
  return {
    connector: 'discord',
    externalId: interaction.id,
    kind: 'click',
    chat: chatOf(channel, interaction.channelId, interaction.guildId),
    sender: senderOf(interaction.user, interaction.inGuild() && interaction.member && 'displayName' in interaction.member ? interaction.member.displayName : undefined),
    text: '',
    messageId: interaction.message.id,
    data: interaction.isStringSelectMenu() ? (interaction.values[0] ?? '') : interaction.customId,
  };
}

/** The emoji as the core writes it: Unicode as it is; a server's own emoji by its name (`:party_parrot:`). */
export function emojiText(reaction: Pick<MessageReaction, 'emoji'>): string | undefined {
  const { id, name } = reaction.emoji;
  if (!name) return undefined;
  return id ? `:${name}:` : name;
}

/** Someone reacted to a message (the core keeps only reactions to the bot's own). */
export function normalizeReaction(reaction: MessageReaction, user: User, channel: Channel | null): InboundEvent | undefined {
  const text = emojiText(reaction);
  if (!text) return undefined;
  const { message } = reaction;
  return {
    connector: 'discord',
    externalId: `reaction:${message.id}:${user.id}:${reaction.emoji.id ?? reaction.emoji.name}`,
    kind: 'reaction',
    chat: chatOf(channel, message.channelId, message.guildId),
    sender: senderOf(user),
    text,
    messageId: message.id,
  };
}
