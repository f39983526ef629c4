import path from 'node:path';
import { webApi } from '@slack/bolt';
import type { Logger } from 'pino';
import { PlatformError, type Connector, type OutboundMessage, type SentMessage } from '#src/connector.ts';
import { questionBlocks } from './blocks.ts';
import { createSlackDraft } from './draft.ts';
import { slackEmojiName } from './emoji.ts';
import { formatForSlack, SECTION_LIMIT, type FormattedPart } from './format.ts';
import { shareTs } from './files.ts';
import { slackErrorCode, toPlatformError } from './web-api.ts';
import { createUnfinishedSends, cutOffForGood } from '../shared/unfinished.ts';

const isDmChannel = (channel: string) => channel.startsWith('D');
/** The metadata each posted part carries: the outbound row's key and the part's index, so a resend finds it. */
const METADATA_TYPE = 'parlor_outbound';
const isUserId = (id: string) => /^[UW][A-Z0-9]+$/.test(id);
/** A resend looks through a thread's first 1,000 replies at most (five pages). */
const LOOKUP_PAGES = 5;

export type SlackSending = Required<Pick<Connector, 'send' | 'edit' | 'react' | 'draft'>>;

/**
 * What the connector sends through the Web API: messages in parts (with their files and buttons, and each part
 * marked so a resend finds what is already there), private replies, edits, reactions and drafts.
 */
export function createSlackSending(deps: {
  client: webApi.WebClient;
  /** The same client without retries, for posting (see the connector). */
  poster: webApi.WebClient;
  log: Logger;
}): SlackSending {
  const { client, poster, log } = deps;
  const dmChannels = new Map<string, string>();
  // Messages cut off here, for their retries (see send).
  const unfinished = createUnfinishedSends();

  /** A user id (a persona's primary, `to: "U…"`) is posted to in the bot's DM with them; channel ids as they are. */
  async function channelFor(chat: string): Promise<string> {
    if (!isUserId(chat)) return chat;
    const known = dmChannels.get(chat);
    if (known) return known;
    const opened = await call('conversations.open', () => client.conversations.open({ users: chat }), false);
    const id = opened.channel?.id;
    if (!id) throw new PlatformError({ platform: 'slack', method: 'conversations.open', retryable: false, message: `no DM channel with ${chat}` });
    dmChannels.set(chat, id);
    return id;
  }

  /** A Web API call whose failure is a PlatformError; `partlySent` makes it final (a retry would repeat what went out). */
  async function call<T>(method: string, fn: () => Promise<T>, partlySent: boolean): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      throw toPlatformError(err, method, partlySent);
    }
  }

  /**
   * The parts of a message (by its key) the channel or thread has already: an attempt whose answer was lost, or a
   * process that died sending it, may have posted some. Each part carries the key in its metadata.
   */
  async function partsPosted(channel: string, message: OutboundMessage): Promise<Map<number, string>> {
    const found = new Map<number, string>();
    if (!message.key) return found;
    // A thread lists oldest first, so a busy one is read to its end; a channel lists newest first.
    let cursor: string | undefined;
    for (let pages = 0; pages < LOOKUP_PAGES; pages++) {
      const listed: any = await call(
        message.thread ? 'conversations.replies' : 'conversations.history',
        () =>
          message.thread
            ? client.conversations.replies({ channel, ts: message.thread, limit: 200, include_all_metadata: true, ...(cursor ? { cursor } : {}) })
            : client.conversations.history({ channel, limit: 100, include_all_metadata: true, ...(cursor ? { cursor } : {}) }),
        false,
      );
      for (const m of listed.messages ?? []) {
        const payload = m.metadata?.event_type === METADATA_TYPE ? m.metadata.event_payload : undefined;
        if (payload?.key === message.key && Number.isInteger(payload.part)) found.set(payload.part, String(m.ts));
      }
      cursor = listed.response_metadata?.next_cursor || undefined;
      if (!message.thread || !listed.has_more || !cursor) break;
    }
    return found;
  }

  /** Posts `parts` from the `from`th on (those before went out, their ids in `ids`). */
  async function postParts(channel: string, parts: FormattedPart[], message: OutboundMessage, ids: string[], from: number) {
    const buttons = message.buttons?.length ? message.buttons : undefined;
    const posted = message.resend && from < parts.length ? await partsPosted(channel, message) : new Map<number, string>();
    for (const [i, part] of parts.entries()) {
      if (i < from) continue;
      const already = posted.get(i);
      if (already) {
        ids.push(already);
        continue;
      }
      const last = i === parts.length - 1;
      const blocks = last && buttons ? questionBlocks(part.mrkdwn, buttons) : undefined;
      const sent = await call(
        'chat.postMessage',
        () =>
          poster.chat.postMessage({
            channel,
            text: part.mrkdwn,
            mrkdwn: true,
            unfurl_links: false,
            unfurl_media: false,
            ...(message.thread ? { thread_ts: message.thread } : {}),
            ...(blocks ? { blocks } : {}),
            ...(message.key ? { metadata: { event_type: METADATA_TYPE, event_payload: { key: message.key, part: i } } } : {}),
          }),
        // A keyed part is found in the chat by a resend, which posts only the rest: the message can be tried again.
        cutOffForGood(message, ids),
      );
      ids.push(String(sent.ts));
    }
  }

  /** Parts for a message: under 4,000 characters, and the one that carries buttons within a section's 3,000. */
  function partsFor(text: string, withButtons: boolean): FormattedPart[] {
    const parts = formatForSlack(text);
    if (!withButtons) return parts.length ? parts : [{ mrkdwn: ' ', source: '', converted: false }];
    const last = parts.pop();
    if (!last) return [{ mrkdwn: '…', source: '', converted: false }];
    return [...parts, ...(last.mrkdwn.length > SECTION_LIMIT ? formatForSlack(last.source, SECTION_LIMIT) : [last])];
  }

  async function send(message: OutboundMessage): Promise<SentMessage> {
    const channel = await channelFor(message.chat);
    const ids: string[] = [];
    if (message.privateTo && !isDmChannel(channel)) {
      // Asked outside a thread (the asking message is the thread's own root): shown where it was asked.
      const thread = message.thread && message.thread !== message.replyTo ? message.thread : undefined;
      for (const part of formatForSlack(message.text)) {
        const sent = await call(
          'chat.postEphemeral',
          () => client.chat.postEphemeral({ channel, user: message.privateTo!, text: part.mrkdwn, ...(thread ? { thread_ts: thread } : {}) }),
          ids.length > 0,
        );
        ids.push(String(sent.message_ts));
      }
      return { ids };
    }
    const files = message.files ?? [];
    let parts = partsFor(message.text, Boolean(message.buttons?.length));
    // The first part of the text is the files' comment; the rest follows as messages.
    const comment = files.length && !message.buttons?.length ? parts.shift() : undefined;
    if (files.length) parts = parts.filter((p) => p.source.trim() || message.buttons?.length);
    // A retry in this process goes on after what went out: files carry no key a resend could find them by, and a
    // long thread hides its parts from the lookup by key.
    const steps = files.length + parts.length;
    ids.push(...unfinished.resume(message, steps));
    const done = ids.length;
    try {
      for (const [i, file] of files.entries()) {
        if (i < done) continue;
        const uploaded: any = await call(
          'files.uploadV2',
          () =>
            client.files.uploadV2({
              channel_id: channel,
              file,
              filename: path.basename(file),
              ...(i === 0 && comment?.source.trim() ? { initial_comment: comment.mrkdwn } : {}),
              ...(message.thread ? { thread_ts: message.thread } : {}),
            } as webApi.FilesUploadV2Arguments),
          cutOffForGood(message, ids),
        );
        ids.push(shareTs(uploaded, channel) ?? String(uploaded.files?.[0]?.files?.[0]?.id ?? ''));
      }
      await postParts(channel, parts, message, ids, Math.max(0, done - files.length));
    } catch (err) {
      unfinished.keep(message, ids, steps);
      throw err;
    }
    unfinished.finished(message);
    return { ids, ...(message.thread ? { thread: message.thread } : {}) };
  }

  async function edit(chat: string, messageId: string, text: string): Promise<void> {
    const channel = await channelFor(chat);
    const [part] = formatForSlack(text);
    const mrkdwn = part?.mrkdwn ?? ' ';
    // The buttons go; the outcome is shown in their place.
    const blocks = mrkdwn.length <= SECTION_LIMIT && mrkdwn.trim() ? [{ type: 'section', text: { type: 'mrkdwn', text: mrkdwn } }] : [];
    await call('chat.update', () => client.chat.update({ channel, ts: messageId, text: mrkdwn, blocks }), false);
  }

  async function react(chat: string, messageId: string, emoji: string): Promise<void> {
    const name = slackEmojiName(emoji);
    if (!name) {
      throw new PlatformError({ platform: 'slack', method: 'reactions.add', retryable: false, message: `${emoji} is not an emoji Slack has a name for; use a standard emoji such as 👍 ✅ 👀 🎉` });
    }
    const channel = await channelFor(chat);
    try {
      await client.reactions.add({ channel, timestamp: messageId, name });
    } catch (err) {
      if (slackErrorCode(err) === 'already_reacted') return;
      throw toPlatformError(err, 'reactions.add', false);
    }
  }

  function draft(target: Parameters<SlackSending['draft']>[0]) {
    let channel: string | undefined;
    const resolve = async () => (channel ??= await channelFor(target.chat));
    return createSlackDraft({
      target,
      group: !isDmChannel(target.chat) && !isUserId(target.chat),
      log,
      calls: {
        post: async (text) => {
          const sent = await client.chat.postMessage({ channel: await resolve(), text, mrkdwn: true, unfurl_links: false, unfurl_media: false, ...(target.thread ? { thread_ts: target.thread } : {}) });
          return String(sent.ts);
        },
        update: async (ts, text) => {
          await client.chat.update({ channel: await resolve(), ts, text, blocks: [] });
        },
        send: (message) => send(message),
        retryAfterMs: (err) => {
          const seconds = (err as { retryAfter?: number }).retryAfter ?? (err as any)?.data?.response_metadata?.retryAfter;
          return typeof seconds === 'number' ? seconds * 1000 : undefined;
        },
        isGone: (err) => slackErrorCode(err) === 'message_not_found',
      },
    });
  }

  return { send, edit, react, draft };
}
