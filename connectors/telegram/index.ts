import { createHash, timingSafeEqual } from 'node:crypto';
import path from 'node:path';
import { autoRetry } from '@grammyjs/auto-retry';
import { Api, GrammyError, HttpError, InputFile } from 'grammy';
import type { Update } from 'grammy/types';
import type { Logger } from 'pino';
import {
  PlatformError,
  type Attachment,
  type Button,
  type Connector,
  type ConnectorStatus,
  type InboundEvent,
  type InboundHandler,
  type OutboundMessage,
  type SentMessage,
} from '#src/connector.ts';
import { ConfigError } from '#src/config/errors.ts';
import { exclusiveReceiver } from '../shared/exclusive.ts';
import { keepConnecting as reconnect } from '../shared/reconnect.ts';
import { saveDownload } from '../shared/download.ts';
import { CAPTION_LIMIT, formatForTelegram, splitText, TEXT_LIMIT } from './format.ts';
import { normalizeUpdate, type BotIdentity } from './normalize.ts';
import { pollUpdates } from './polling.ts';
import { createTelegramDraft, EDIT_LIMITS } from './draft.ts';
import { createChatThrottle } from './throttle.ts';
import { createUnfinishedSends, cutOffForGood } from '../shared/unfinished.ts';
import { createBotApiFetch } from './fetch.ts';

export interface TelegramOptions {
  token: string;
  /** Another Bot API server (self-hosted, or an emulator in tests). */
  apiRoot?: string;
  log: Logger;
  /** Long-poll wait per getUpdates call. */
  pollTimeoutSeconds?: number;
  /** Public URL of Parlor's webhook endpoint: webhook mode instead of long polling. */
  webhookUrl?: string;
}

export const WEBHOOK_PATH = '/telegram/webhook';

/** The secret Telegram echoes in X-Telegram-Bot-Api-Secret-Token; derived from the token, so nothing to configure. */
export function webhookSecret(token: string): string {
  return createHash('sha256').update(`parlor-webhook:${token}`).digest('base64url').slice(0, 48);
}

const ALLOWED_UPDATES = ['message', 'edited_message', 'callback_query', 'message_reaction'] as const;

/** The emoji setMessageReaction accepts (Bot API ReactionTypeEmoji), without variation selectors. */
const REACTION_EMOJI = new Set(
  '👍 👎 ❤ 🔥 🥰 👏 😁 🤔 🤯 😱 🤬 😢 🎉 🤩 🤮 💩 🙏 👌 🕊 🤡 🥱 🥴 😍 🐳 ❤‍🔥 🌚 🌭 💯 🤣 ⚡ 🍌 🏆 💔 🤨 😐 🍓 🍾 💋 🖕 😈 😴 😭 🤓 👻 👨‍💻 👀 🎃 🙈 😇 😨 🤝 ✍ 🤗 🫡 🎅 🎄 ☃ 💅 🤪 🗿 🆒 💘 🙉 🦄 😘 💊 🙊 😎 👾 🤷‍♂ 🤷 🤷‍♀ 😡'.split(' '),
);


/** grammY's Bot API client as Parlor uses it. */
export function createTelegramApi(token: string, apiRoot?: string): Api {
  // A call that hangs (a wrong TELEGRAM_API_ROOT, a black-holed network) gives up in time to be retried and logged;
  // the long poll's own wait (25 s) fits well within it.
  const api = new Api(token, { ...(apiRoot ? { apiRoot } : {}), timeoutSeconds: API_TIMEOUT_SECONDS, fetch: createBotApiFetch() });
  // 429s (with retry_after) and 5xx are retried per API call, so a long reply never resends its first parts. Network
  // errors come back at once, to the callers that log them and say when they try again.
  api.config.use(autoRetry({ maxRetryAttempts: 5, maxDelaySeconds: 120, rethrowHttpErrors: true }));
  return api;
}

const API_TIMEOUT_SECONDS = 90;
/** How long a start-up that cannot reach Telegram waits between tries, at most. */

/**
 * Telegram over the Bot API with grammY's client. Updates are long-polled by this process alone (or pushed to
 * the webhook); each is handed to the core and acknowledged only once the core has taken it. Sends go out as HTML
 * converted from Markdown, split under 4096 chars.
 */
export function createTelegramConnector(options: TelegramOptions): Connector {
  const log = options.log.child({ connector: 'telegram' });
  const api = createTelegramApi(options.token, options.apiRoot);
  const throttle = createChatThrottle();
  const unfinished = createUnfinishedSends();
  let bot: BotIdentity | undefined;
  let polling: Promise<void> | undefined;
  let starting: Promise<void> | undefined;
  let handler: InboundHandler | undefined;
  let state: ConnectorStatus = { state: 'starting' };
  const stopper = new AbortController();

  /** Who the bot is, then how it receives: the webhook registered, or long polling started. */
  async function connect(): Promise<void> {
    const me = await api.getMe();
    bot = { id: me.id, username: me.username };
    if (options.webhookUrl) {
      // TELEGRAM_WEBHOOK_URL is Parlor's public base URL, or the full URL of the endpoint.
      const base = options.webhookUrl.replace(/\/+$/, '');
      await api.setWebhook(base.endsWith(WEBHOOK_PATH) ? base : base + WEBHOOK_PATH, {
        secret_token: secret,
        allowed_updates: [...ALLOWED_UPDATES],
      });
      state = { state: 'up' };
      log.info({ bot: `@${bot.username}` }, 'receiving Telegram updates by webhook');
      return;
    }
    // Polling and a webhook cannot both receive updates.
    await api.deleteWebhook().catch((err) => log.warn({ err: describe(err) }, 'deleteWebhook failed'));
    state = { state: 'up' };
    polling = pollUpdates({
      api,
      signal: stopper.signal,
      timeoutSeconds: options.pollTimeoutSeconds ?? 25,
      allowedUpdates: ALLOWED_UPDATES,
      log,
      handle: (update) => deliverUpdate(update, handler!),
      onState: (next) => (state = next),
    }).catch((err) => log.error({ err }, 'polling stopped'));
    log.info({ bot: `@${bot.username}` }, 'receiving Telegram updates by long polling');
  }

  /** Telegram could not be reached at start: every try is logged with its cause and when the next one is. */
  function keepConnecting(first: unknown): Promise<void> {
    return reconnect({
      platform: 'Telegram',
      first,
      connect,
      signal: stopper.signal,
      describe,
      fatal: (err) => (isTokenRefused(err) ? { detail: describe(err), message: tokenRefused(err as GrammyError, options.apiRoot).message } : undefined),
      setState: (next) => (state = next),
      log,
      where: { apiRoot: options.apiRoot ?? 'https://api.telegram.org' },
    });
  }

  /** Resolves once the core has taken the update (stored, set aside, or nothing to do); throws to have it again. */
  async function deliverUpdate(update: Update, onInbound: InboundHandler): Promise<void> {
    let event: InboundEvent | undefined;
    try {
      event = normalizeUpdate(update, bot!);
    } catch (err) {
      // Nothing the core could store or retry: holding the update would stop every chat.
      log.error({ err, update: update.update_id }, 'update could not be read; skipped');
    }
    const query = update.callback_query;
    if (!query) {
      if (event) await onInbound(event);
      return;
    }
    // Every button press is answered, or the user's client keeps spinning.
    let notice: string | undefined;
    try {
      if (event) notice = (await onInbound(event)).notice;
    } finally {
      await api.answerCallbackQuery(query.id, notice ? { text: notice } : undefined).catch((err) => log.warn({ err }, 'answerCallbackQuery failed'));
    }
  }

  const secret = webhookSecret(options.token);

  /**
   * Webhook mode: the 200 goes back only once the core has taken the update (stored it, or set it aside after
   * repeated failures); a 500 before that has Telegram deliver it again.
   */
  async function handleWebhook(request: Request): Promise<Response> {
    const given = Buffer.from(request.headers.get('x-telegram-bot-api-secret-token') ?? '');
    const expected = Buffer.from(secret);
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) return new Response('unauthorized', { status: 401 });
    if (!handler || !bot) return new Response('not ready', { status: 503 });
    let update: Update;
    try {
      update = (await request.json()) as Update;
    } catch {
      return new Response('bad request', { status: 400 });
    }
    try {
      await deliverUpdate(update, handler);
      return new Response(null, { status: 200 });
    } catch (err) {
      log.error({ err, update: update.update_id }, 'update could not be stored; Telegram will deliver it again');
      return new Response('retry later', { status: 500 });
    }
  }

  const connector: Connector = {
    id: 'telegram',
    capabilities: {
      buttons: true,
      edits: EDIT_LIMITS,
      removeButtons: true,
      react: true,
      threads: true,
      typing: true,
      // No ephemeral messages in Telegram groups: what concerns one person is answered in the chat, to their message.
      privateReplies: false,
      maxTextLength: TEXT_LIMIT,
    },
    // Telegram gives a token's updates to one long poller (a second gets 409): one process polls; webhooks may be many.
    ...(options.webhookUrl
      ? { webhook: { path: WEBHOOK_PATH, handle: handleWebhook } }
      : { exclusive: exclusiveReceiver('telegram-polling', options.token, 'Telegram long polling for this bot token') }),

    async start(onInbound) {
      handler = onInbound;
      // The token is checked now: a refused one stops start-up with what to do. Telegram being unreachable does
      // not: Parlor runs, says so in the log and in /healthz, and keeps trying.
      try {
        await connect();
      } catch (err) {
        if (isTokenRefused(err)) throw tokenRefused(err as GrammyError, options.apiRoot);
        state = { state: 'down', detail: describe(err) };
        starting = keepConnecting(err);
      }
    },

    status: () => state,

    async stop() {
      stopper.abort();
      await starting;
      await polling;
    },

    async send(message: OutboundMessage): Promise<SentMessage> {
      const keyboard = message.buttons ? inlineKeyboard(message.buttons) : undefined;
      const files = message.files ?? [];
      // With files, the start of the text is the first file's caption (1024 at most); the rest follows as text.
      const pieces = files.length ? splitText(message.text, CAPTION_LIMIT) : [message.text];
      const caption = files.length && pieces[0] ? formatForTelegram(pieces[0], CAPTION_LIMIT)[0] : undefined;
      const parts = formatForTelegram(files.length ? pieces.slice(1).join('\n\n') : message.text);
      const steps = files.length + parts.length;
      // A retry of a message cut off after some of its parts (see UnfinishedSends) goes on where it stopped.
      const ids: string[] = [...unfinished.resume(message, steps)];
      const done = ids.length;
      let step = 0;
      const optionsFor = () => {
        const i = step++;
        return {
          ...(message.thread ? { message_thread_id: Number(message.thread) } : {}),
          ...(i === 0 && message.replyTo ? { reply_parameters: { message_id: Number(message.replyTo), allow_sending_without_reply: true } } : {}),
          // The buttons go under the last part, after the whole question has been read.
          ...(keyboard && i === steps - 1 ? { reply_markup: keyboard } : {}),
        };
      };
      /** Sends with HTML, or, when Telegram rejects the markup, the same text plain. */
      const withFallback = async <T>(method: string, html: () => Promise<T>, plain: () => Promise<T>): Promise<T> => {
        await throttle.take(message.chat);
        try {
          try {
            return await html();
          } catch (err) {
            if (!(err instanceof GrammyError && /can't parse entities|unsupported start tag|can't find end tag/i.test(err.description))) throw err;
            log.warn({ chat: message.chat, method, description: err.description }, 'Telegram rejected the formatting; sending plain text');
            return await plain();
          }
        } catch (err) {
          // Telegram takes no key to find a part by: a retry goes on after the parts that are out, in this process.
          unfinished.keep(message, ids, steps);
          throw toPlatformError(err, method, cutOffForGood(message, ids));
        }
      };

      for (const [i, file] of files.entries()) {
        const common = optionsFor();
        if (step <= done) continue;
        const withCaption = i === 0 && caption;
        const photo = /\.(jpe?g|png|gif|webp)$/i.test(file);
        const method = photo ? 'sendPhoto' : 'sendDocument';
        const upload = (extra: object): Promise<{ message_id: number }> =>
          photo ? api.sendPhoto(message.chat, new InputFile(file), { ...common, ...extra }) : api.sendDocument(message.chat, new InputFile(file), { ...common, ...extra });
        const sent = await withFallback(
          method,
          () => upload(withCaption ? { caption: caption.html, parse_mode: 'HTML' } : {}),
          () => upload(withCaption ? { caption: caption.plain } : {}),
        );
        ids.push(String(sent.message_id));
      }
      for (const part of parts) {
        const common = optionsFor();
        if (step <= done) continue;
        const sent = await withFallback(
          'sendMessage',
          () => api.sendMessage(message.chat, part.html, { ...common, parse_mode: 'HTML' }),
          () => api.sendMessage(message.chat, part.plain, common),
        );
        ids.push(String(sent.message_id));
      }
      unfinished.finished(message);
      return { ids };
    },

    async edit(chat, messageId, text) {
      const [part] = formatForTelegram(text);
      const options = { reply_markup: { inline_keyboard: [] } };
      try {
        try {
          await api.editMessageText(chat, Number(messageId), part.html, { ...options, parse_mode: 'HTML' });
        } catch (err) {
          if (!(err instanceof GrammyError && /can't parse entities/i.test(err.description))) throw err;
          await api.editMessageText(chat, Number(messageId), part.plain, options);
        }
      } catch (err) {
        // Editing to the same content is not a failure.
        if (err instanceof GrammyError && /message is not modified/i.test(err.description)) return;
        throw toPlatformError(err, 'editMessageText', false);
      }
    },

    async react(chat, messageId, emoji) {
      const normalized = emoji.replace(/\uFE0F/g, '');
      if (!REACTION_EMOJI.has(normalized)) {
        throw new PlatformError({
          platform: 'telegram',
          method: 'setMessageReaction',
          retryable: false,
          message: `${emoji} is not one of Telegram's reaction emoji; use one of ${[...REACTION_EMOJI].slice(0, 12).join(' ')} …`,
        });
      }
      try {
        await api.setMessageReaction(chat, Number(messageId), [{ type: 'emoji', emoji: normalized as never }]);
      } catch (err) {
        throw toPlatformError(err, 'setMessageReaction', false);
      }
    },

    async download(attachment, directory) {
      const file = await api.getFile(attachment.fileId!);
      if (!file.file_path) throw new Error('Telegram gave no file path');
      const url = `${options.apiRoot ?? 'https://api.telegram.org'}/file/bot${options.token}/${file.file_path}`;
      return saveDownload(url, { directory, name: uploadName(attachment, file.file_path) }, stopper.signal);
    },

    async typing(chat, thread) {
      await api.sendChatAction(chat, 'typing', thread ? { message_thread_id: Number(thread) } : undefined);
    },

    draft(target) {
      return createTelegramDraft({ api, log, target, send: (message) => connector.send(message), take: (chat) => throttle.take(chat) });
    },
  };
  return connector;
}

/** Telegram's inline keyboard; callback_data is limited to 64 bytes, so a longer payload is a programming error. */
export function inlineKeyboard(rows: Button[][]) {
  return {
    inline_keyboard: rows.map((row) =>
      row.map((button) => {
        if (Buffer.byteLength(button.data) > 64) throw new Error(`button data "${button.data}" is over Telegram's 64-byte limit`);
        return { text: button.label, callback_data: button.data };
      }),
    ),
  };
}

/** A safe, unique file name: the sender's name when there is one, else the type, plus a piece of the file id. */
function uploadName(attachment: Attachment, filePath: string): string {
  const original = attachment.name ? path.basename(attachment.name).replace(/[^\w.-]+/g, '_') : `${attachment.type}${path.extname(filePath)}`;
  const ext = path.extname(original);
  return `${path.basename(original, ext).slice(0, 60)}-${attachment.fileId!.slice(-8).replace(/[^\w-]/g, '')}${ext}`;
}

/** Once part of a message is out, retrying the whole send would repeat it: such a failure is final. */
function toPlatformError(err: unknown, method: string, partlySent: boolean): PlatformError {
  if (err instanceof GrammyError) {
    const retryAfter = err.parameters?.retry_after;
    return new PlatformError(
      {
        platform: 'telegram',
        method,
        status: err.error_code,
        retryAfterMs: retryAfter ? retryAfter * 1000 : undefined,
        retryable: !partlySent && (err.error_code === 429 || err.error_code >= 500),
        message: err.description,
      },
      { cause: err },
    );
  }
  const network = err instanceof HttpError;
  return new PlatformError(
    { platform: 'telegram', method, retryable: !partlySent && network, message: describe(err) },
    { cause: err },
  );
}

function describe(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** A 401 (or 404: no bot has this token) from getMe: the token is wrong, not the network. */
function isTokenRefused(err: unknown): boolean {
  return err instanceof GrammyError && (err.error_code === 401 || err.error_code === 404);
}

function tokenRefused(err: GrammyError, apiRoot: string | undefined): ConfigError {
  return new ConfigError(
    `TELEGRAM_BOT_TOKEN was refused by ${apiRoot ?? 'Telegram'} (${err.error_code} ${err.description}); ` +
      'get the token again from @BotFather (/mybots → your bot → API Token) and set TELEGRAM_BOT_TOKEN',
  );
}
