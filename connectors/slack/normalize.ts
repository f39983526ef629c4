// Slack events and clicks as Parlor's InboundEvent: translation only.
import type { Attachment, ChatRef, InboundEvent } from '#src/connector.ts';
import { unicodeForSlackName } from './emoji.ts';
import { mrkdwnToPlain } from './format.ts';

/** Who the bot is in the workspace (auth.test). */
export interface SlackBot {
  userId: string;
  botId: string;
  name: string;
}

/** Message subtypes that are a person's message; every other subtype (joins, topic changes, bots…) is not. */
const PERSON_SUBTYPES = new Set([undefined, 'file_share', 'thread_broadcast', 'me_message']);

/** IM channel ids start with D; `channel_type` says so too where the event has it (app_mention does not). */
function chatType(channel: string, channelType?: string): ChatRef['type'] {
  if (channelType) return channelType === 'im' ? 'dm' : 'group';
  return channel.startsWith('D') ? 'dm' : 'group';
}

/**
 * The id the core deduplicates a message by: its channel and ts, the same whichever event carried it (an
 * `app_mention` and the `message` for one post, a redelivery with another envelope) and for as long as the core
 * keeps inbound ids.
 */
export const messageKey = (channel: string, ts: string) => `${channel}:${ts}`;

const mentionOf = (bot: SlackBot) => new RegExp(`<@${bot.userId}(?:\\|[^>]*)?>`, 'g');

/** The text the model reads: the leading mention that addressed the bot dropped, links and entities decoded. */
function readableText(text: string, bot: SlackBot): string {
  const leading = new RegExp(`^\\s*<@${bot.userId}(?:\\|[^>]*)?>[\\s,:]*`);
  return mrkdwnToPlain(text.replace(leading, '').replace(mentionOf(bot), `@${bot.name}`)).trim();
}

function attachmentsOf(files: any[] | undefined): Attachment[] {
  return (files ?? [])
    .filter((f) => f && typeof f.id === 'string' && f.mode !== 'tombstone')
    .map((f) => ({
      type: typeof f.mimetype === 'string' && f.mimetype.startsWith('image/') ? 'photo' : typeof f.mimetype === 'string' && f.mimetype.startsWith('audio/') ? 'audio' : typeof f.mimetype === 'string' && f.mimetype.startsWith('video/') ? 'video' : 'document',
      fileId: f.id,
      name: typeof f.name === 'string' ? f.name : undefined,
      size: typeof f.size === 'number' ? f.size : undefined,
      mimeType: typeof f.mimetype === 'string' ? f.mimetype : undefined,
    }));
}

/** Posted by this bot or another one: never answered (a reply loop otherwise). */
const byBot = (m: any, bot: SlackBot) => Boolean(m.bot_id) || m.user === bot.userId || m.subtype === 'bot_message';

/** A person's message (new, or an edit) as an event, given where it was posted. */
function messageEvent(m: any, channel: string, channelType: string | undefined, bot: SlackBot, fields: { externalId: string; kind: 'message' | 'edit'; mention?: boolean; files?: any[] }): InboundEvent | undefined {
  const text = readableText(typeof m.text === 'string' ? m.text : '', bot);
  const attachments = attachmentsOf(fields.files ?? m.files);
  if (!text && attachments.length === 0) return undefined;
  const type = chatType(channel, channelType);
  const mentioned = type === 'group' ? Boolean(fields.mention) || mentionOf(bot).test(m.text ?? '') : undefined;
  // A mention outside a thread is answered in a thread on it: its ts is the thread from the start, so the whole
  // turn (replies, questions, what follows in the thread) is one conversation there.
  const thread = typeof m.thread_ts === 'string' ? m.thread_ts : type === 'group' && mentioned ? m.ts : undefined;
  return {
    connector: 'slack',
    externalId: fields.externalId,
    kind: fields.kind,
    chat: { id: channel, type, thread },
    sender: { id: m.user, name: m.user_profile?.real_name || m.user_profile?.display_name || undefined, username: m.user_profile?.name || undefined },
    text,
    messageId: m.ts,
    mentioned,
    // A post in a thread the bot started (a top-level message of its own): answering it is expected.
    replyToBot: m.parent_user_id === bot.userId && m.thread_ts !== m.ts,
    attachments: attachments.length ? attachments : undefined,
  };
}

/** An Events API event as Parlor's InboundEvent; undefined for what Parlor does not act on. */
export function normalizeEvent(event: any, eventId: string, bot: SlackBot): InboundEvent | undefined {
  if (!event || typeof event !== 'object') return undefined;
  if (event.type === 'app_mention' || event.type === 'message') {
    const channel = event.channel;
    if (typeof channel !== 'string') return undefined;
    if (event.subtype === 'message_changed') return changedMessage(event, bot);
    if (!PERSON_SUBTYPES.has(event.subtype) || byBot(event, bot) || typeof event.user !== 'string' || typeof event.ts !== 'string') return undefined;
    return messageEvent(event, channel, event.channel_type, bot, { externalId: messageKey(channel, event.ts), kind: 'message', mention: event.type === 'app_mention' });
  }
  if (event.type === 'reaction_added') {
    const item = event.item;
    if (item?.type !== 'message' || typeof event.user !== 'string' || event.user === bot.userId) return undefined;
    const emoji = unicodeForSlackName(String(event.reaction ?? ''));
    // A custom emoji has no Unicode form: the core would not know what it says.
    if (!emoji) return undefined;
    return {
      connector: 'slack',
      externalId: `reaction:${eventId}`,
      kind: 'reaction',
      chat: { id: item.channel, type: chatType(item.channel) },
      sender: { id: event.user },
      text: emoji,
      messageId: item.ts,
    };
  }
  return undefined;
}

/**
 * `message_changed`: a person's edit becomes an `(edited)` message; files added to a message later (a `file_share`
 * that arrives as an edit) are a new message with those files. The bot's own edits, and changes that leave the text
 * as it was (a link preview added), are nothing.
 */
function changedMessage(event: any, bot: SlackBot): InboundEvent | undefined {
  const m = event.message;
  const before = event.previous_message ?? {};
  if (!m || typeof m.user !== 'string' || typeof m.ts !== 'string' || byBot(m, bot)) return undefined;
  const known = new Set((before.files ?? []).map((f: any) => f?.id));
  const added = (m.files ?? []).filter((f: any) => f?.id && !known.has(f.id));
  if (added.length) {
    return messageEvent(m, event.channel, event.channel_type, bot, {
      externalId: `files:${messageKey(event.channel, m.ts)}:${added.map((f: any) => f.id).join(',')}`,
      kind: 'message',
      files: added,
    });
  }
  if ((m.text ?? '') === (before.text ?? '')) return undefined;
  return messageEvent(m, event.channel, event.channel_type, bot, { externalId: `edit:${messageKey(event.channel, m.ts)}:${m.edited?.ts ?? event.ts}`, kind: 'edit' });
}

/** A Block Kit button click (`block_actions`) as a click event carrying the button's value. */
export function normalizeClick(body: any, action: any): InboundEvent | undefined {
  const user = body?.user;
  const channel = body?.channel?.id ?? body?.container?.channel_id;
  if (!user?.id || typeof channel !== 'string' || typeof action?.value !== 'string') return undefined;
  const messageTs = body.container?.message_ts ?? body.message?.ts;
  return {
    connector: 'slack',
    externalId: `click:${channel}:${messageTs}:${action.action_ts ?? body.trigger_id}`,
    kind: 'click',
    chat: { id: channel, type: chatType(channel), thread: body.container?.thread_ts ?? body.message?.thread_ts },
    sender: { id: user.id, name: user.name, username: user.username ?? user.name },
    text: '',
    messageId: messageTs,
    data: action.value,
  };
}
