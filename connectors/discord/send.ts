import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import { DiscordAPIError, Routes, type Client, type REST } from 'discord.js';
import type { Logger } from 'pino';
import { PlatformError, type Connector, type OutboundMessage, type SentMessage } from '#src/connector.ts';
import { componentsFor } from './components.ts';
import { createDiscordDraft } from './draft.ts';
import { describe, refusesContent, toPlatformError } from './errors.ts';
import { cutOffForGood } from '../shared/unfinished.ts';
import { formatForDiscord, plainForDiscord } from './format.ts';

/** Model text never pings @everyone, @here or a role; people named by `<@id>` and the replied-to author may be. */
const ALLOWED_MENTIONS = { parse: ['users'], replied_user: true };
/** Files per message Discord takes. */
const FILES_PER_MESSAGE = 10;

export type DiscordSending = Required<Pick<Connector, 'send' | 'edit' | 'react' | 'typing' | 'draft'>>;

/** What the connector sends through REST: messages with their files and buttons, edits, reactions, "typing…" and drafts. */
export function createDiscordSending(deps: {
  /** The connected client, once there is one. */
  client: () => Client | undefined;
  rest: () => REST;
  /** Channel ids seen in events: a send to one of them needs no lookup. */
  channels: Set<string>;
  log: Logger;
}): DiscordSending {
  const { rest, channels, log } = deps;
  /** DM channels opened for people named by their user id (a persona's `primary`), by user id. */
  const dmChannels = new Map<string, string>();

  /** The channel a message goes to: a thread, a channel, or the DM with a person named by their user id. */
  async function channelFor(chat: string, thread?: string): Promise<string> {
    if (thread) return thread;
    const opened = dmChannels.get(chat);
    if (opened) return opened;
    if (channels.has(chat)) return chat;
    const client = deps.client();
    // Between gateway sessions (a dropped connection being made again) there is no client to ask: a retryable
    // refusal, as every REST call gives then, the outbox tries again.
    if (!client) throw new PlatformError({ platform: 'discord', method: 'getChannel', retryable: true, message: 'not connected yet' });
    if (client.channels.cache.has(chat)) return chat;
    // Ids of users and channels never collide: a known user is a person to write to in their DM.
    if (!client.users.cache.has(chat)) {
      try {
        await client.channels.fetch(chat);
        channels.add(chat);
        return chat;
      } catch (err) {
        if (!(err instanceof DiscordAPIError && (err.code === 10003 || err.status === 404))) throw toPlatformError(err, 'getChannel', false);
      }
    }
    try {
      const dm = (await rest().post(Routes.userChannels(), { body: { recipient_id: chat } })) as { id: string };
      dmChannels.set(chat, dm.id);
      return dm.id;
    } catch (err) {
      throw toPlatformError(err, 'createDM', false);
    }
  }

  /**
   * One message; a part Discord refuses (Invalid Form Body on its content) goes again as plain text. `nonce` names each
   * message it creates: from the outbound key when there is one, so a resend after a crash finds the message Discord
   * created before the answer was lost (within Discord's few minutes) instead of creating it again.
   */
  async function post(
    channelId: string,
    body: Record<string, unknown>,
    files: { name: string; data: Buffer }[],
    ids: string[],
    nonce: () => string,
  ): Promise<void> {
    const attempt = async (content: string | undefined, extra: Record<string, unknown>, withFiles: typeof files) => {
      const payload = {
        ...body,
        ...extra,
        ...(content !== undefined ? { content } : {}),
        allowed_mentions: ALLOWED_MENTIONS,
        // discord.js retries 5xx itself: the nonce keeps a message Discord created before failing from showing twice.
        nonce: nonce(),
        enforce_nonce: true,
        ...(withFiles.length ? { attachments: withFiles.map((f, i) => ({ id: i, filename: f.name })) } : {}),
      };
      const sent = (await rest().post(Routes.channelMessages(channelId), { body: payload, files: withFiles.length ? withFiles : undefined })) as { id: string };
      ids.push(sent.id);
    };
    const content = body.content as string | undefined;
    try {
      await attempt(content, {}, files);
    } catch (err) {
      if (!content || !refusesContent(err)) throw err;
      log.warn({ channel: channelId, err: describe(err) }, 'Discord refused the message; sending it as plain text');
      const pieces = plainForDiscord(content);
      for (const [i, piece] of pieces.entries()) {
        const first = i === 0;
        const last = i === pieces.length - 1;
        await attempt(piece, { message_reference: first ? body.message_reference : undefined, components: last ? body.components : undefined }, first ? files : []);
      }
    }
  }

  const sending: DiscordSending = {
    async send(message: OutboundMessage): Promise<SentMessage> {
      const channelId = await channelFor(message.chat, message.thread);
      const parts = message.text.trim() ? formatForDiscord(message.text) : [];
      const files = await Promise.all((message.files ?? []).map(async (file) => ({ name: path.basename(file), data: await fs.readFile(file) })));
      const fileGroups = Array.from({ length: Math.ceil(files.length / FILES_PER_MESSAGE) }, (_, i) => files.slice(i * FILES_PER_MESSAGE, (i + 1) * FILES_PER_MESSAGE));
      const components = message.buttons?.length ? componentsFor(message.buttons) : [];
      const count = Math.max(parts.length, fileGroups.length, components.length ? 1 : 0);
      const ids: string[] = [];
      // Discord takes up to 25 characters: the same ones for the same part of the same message, attempt after attempt.
      let made = 0;
      const nonce = () =>
        message.key ? createHash('sha256').update(`${message.key}:${channelId}:${made++}`).digest('hex').slice(0, 25) : randomBytes(9).toString('hex');
      try {
        for (let i = 0; i < count; i++) {
          const body: Record<string, unknown> = {
            // Buttons need something to sit under.
            content: parts[i] ?? (components.length && i === count - 1 && !fileGroups[i] ? '…' : undefined),
            // Only the first part quotes the message it answers; the buttons go under the last.
            ...(i === 0 && message.replyTo ? { message_reference: { message_id: message.replyTo, fail_if_not_exists: false } } : {}),
            ...(i === count - 1 && components.length ? { components } : {}),
          };
          await post(channelId, body, fileGroups[i] ?? [], ids, nonce);
        }
      } catch (err) {
        // A keyed message's parts go again with the nonces they had, which Discord answers with the messages it made:
        // it can be tried again.
        throw toPlatformError(err, 'createMessage', cutOffForGood(message, ids));
      }
      return { ids };
    },

    async edit(chat, messageId, text, thread) {
      const channelId = await channelFor(chat, thread);
      const [first = '…'] = formatForDiscord(text);
      try {
        await rest().patch(Routes.channelMessage(channelId, messageId), { body: { content: first, components: [], allowed_mentions: ALLOWED_MENTIONS } });
      } catch (err) {
        throw toPlatformError(err, 'editMessage', false);
      }
    },

    async react(chat, messageId, emoji, thread) {
      const channelId = await channelFor(chat, thread);
      try {
        await rest().put(Routes.channelMessageOwnReaction(channelId, messageId, reactionEmoji(emoji)));
      } catch (err) {
        if (err instanceof DiscordAPIError && err.code === 10014) {
          throw new PlatformError({ platform: 'discord', method: 'addReaction', status: err.status, retryable: false, message: `${emoji} is not an emoji Discord knows (a server's own emoji is written <:name:id>)` }, { cause: err });
        }
        throw toPlatformError(err, 'addReaction', false);
      }
    },

    async typing(chat, thread) {
      await rest().post(Routes.channelTyping(await channelFor(chat, thread)));
    },

    draft(target) {
      const channel = channelFor(target.chat, target.thread);
      return createDiscordDraft({
        target,
        async post(text, replyTo) {
          const ids: string[] = [];
          const nonce = () => randomBytes(9).toString('hex');
          await post(await channel, { content: text, ...(replyTo ? { message_reference: { message_id: replyTo, fail_if_not_exists: false } } : {}) }, [], ids, nonce);
          return ids[0];
        },
        async edit(messageId, text) {
          await rest().patch(Routes.channelMessage(await channel, messageId), { body: { content: text, allowed_mentions: ALLOWED_MENTIONS } });
        },
        send: (text, replyTo) => sending.send({ chat: target.chat, thread: target.thread, text, replyTo }),
        isGone: (err) => err instanceof DiscordAPIError && (err.code === 10008 || err.code === 10003),
        firstPart(text) {
          const [first = '', ...rest] = formatForDiscord(text);
          return { first, rest: rest.join('\n\n') };
        },
        onError: (err) => log.debug({ err: describe(err) }, 'draft update failed'),
      });
    },
  };
  return sending;
}

/** Unicode as it is; a server's own emoji as `name:id` (written `<:name:id>`, `<a:name:id>` or `name:id`). */
export function reactionEmoji(emoji: string): string {
  const custom = /^<?a?:?([\w~]{2,32}):(\d{17,21})>?$/.exec(emoji.trim());
  return custom ? `${custom[1]}:${custom[2]}` : emoji.trim();
}
