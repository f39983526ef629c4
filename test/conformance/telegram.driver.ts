// Telegram for the conformance suite: the real connector, long polling a scripted Bot API (test/support/fake-telegram.ts)
// that hands out updates until they are acknowledged and records every call with its time.
import pino from 'pino';
import { createTelegramConnector } from '../../connectors/telegram/index.ts';
import { chatConversationId } from '../../src/conversation-id.ts';
import { startFakeTelegram, type BotApiCall, type FakeTelegram } from '../support/fake-telegram.ts';
import { until } from '../support/until.ts';
import { PERSONA, setStreaming, settle, startConformanceApp, type ConformanceApp } from './app.ts';
import type { AckTiming, BotMessage, ChatName, ClickResult, Person, PlatformDriver, PostedMessage, PostOptions } from './driver.ts';

const TOKEN = '123456:conformance';
/** Who the fake Bot API says the bot is (getMe). */
const BOT = { id: 4242, is_bot: true, first_name: 'Parlor', username: 'parlor_test_bot' };
const PEOPLE: Record<Person, { id: number; is_bot: false; first_name: string; username: string }> = {
  owner: { id: 1001, is_bot: false, first_name: 'Ana', username: 'ana' },
  helper: { id: 1002, is_bot: false, first_name: 'Bo', username: 'bo' },
  stranger: { id: 2002, is_bot: false, first_name: 'Eve', username: 'eve' },
};
const GROUPS = {
  team: { id: -100123, type: 'supergroup', title: 'Team', is_forum: true },
  unlisted: { id: -100999, type: 'supergroup', title: 'Elsewhere' },
} as const;
/** The forum topic `thread: true` posts in. */
const TOPIC = 77;

type Update = { update_id: number; [kind: string]: unknown };

interface Delivery {
  update: Update;
  kind: 'message' | 'click';
  /** Calls recorded before the update was queued: its hand-out and acknowledgement come after. */
  since: number;
}

interface Sent extends BotMessage {
  chat: string;
  /** The buttons as first sent, so a click after they are gone is still possible (a stale click). */
  buttons: { text: string; callback_data: string }[];
}

/** What a person sees of a message: Telegram renders the HTML the bot sends. */
function visibleText(text: string, parseMode: unknown): string {
  if (parseMode !== 'HTML') return text;
  return text
    .replace(/<[^>]+>/g, '')
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&quot;/g, '"')
    .replace(/&amp;/g, '&');
}

const chatIdOf = (chat: ChatName): number => (chat.startsWith('dm:') ? PEOPLE[chat.slice(3) as Person].id : GROUPS[chat as keyof typeof GROUPS].id);

export function createTelegramDriver(): PlatformDriver {
  let api: FakeTelegram;
  let running: ConformanceApp;
  let nextUpdate = 1000;
  let nextMessage = 5000;
  let deliveries: Delivery[] = [];
  const conversations = new Set<string>();

  const handedOut = (delivery: Delivery): number | undefined => {
    const { calls } = api;
    for (let i = delivery.since; i < calls.length; i++) {
      const call = calls[i];
      if (call.method === 'getUpdates' && Array.isArray(call.result) && call.result.some((u: Update) => u.update_id === delivery.update.update_id)) return i;
    }
    return undefined;
  };

  /** The call that acknowledged the update: the next poll past it, or the answer to a click. */
  const acknowledgement = (delivery: Delivery): { handout: BotApiCall; ack: BotApiCall } | undefined => {
    const from = handedOut(delivery);
    if (from === undefined) return undefined;
    const { calls } = api;
    const query = (delivery.update.callback_query as { id?: string } | undefined)?.id;
    for (let i = from + 1; i < calls.length; i++) {
      const call = calls[i];
      const acked = query
        ? call.method === 'answerCallbackQuery' && call.body.callback_query_id === query
        : call.method === 'getUpdates' && Number(call.body.offset ?? 0) > delivery.update.update_id;
      if (acked) return { handout: calls[from], ack: call };
    }
    return undefined;
  };

  async function deliver(update: Update, kind: Delivery['kind'], options: { again?: boolean } = {}) {
    const delivery: Delivery = { update, kind, since: api.calls.length };
    deliveries.push(delivery);
    // A redelivery comes whatever the poller acknowledged already (Telegram re-sends after a crash); a new update is
    // handed out until it is acknowledged.
    if (options.again) api.pushUpdates(update);
    else api.queueUpdates(update);
    return until(() => acknowledgement(delivery), `Telegram update ${update.update_id} to be acknowledged`);
  }

  function track(chat: number, thread?: number) {
    conversations.add(chatConversationId(PERSONA, 'telegram', String(chat), thread ? String(thread) : undefined));
  }

  function record(): Sent[] {
    const out: Sent[] = [];
    for (const call of api.calls) {
      const result = call.result as { message_id?: number } | undefined;
      if (['sendMessage', 'sendPhoto', 'sendDocument'].includes(call.method) && result?.message_id !== undefined) {
        const buttons = (call.body.reply_markup?.inline_keyboard ?? []).flat();
        out.push({
          id: String(result.message_id),
          chat: String(call.body.chat_id),
          text: visibleText(call.body.text ?? call.body.caption ?? '', call.body.parse_mode),
          formatted: call.body.parse_mode === 'HTML',
          buttons,
          choices: buttons.map((b: { text: string }) => b.text),
          replyTo: call.body.reply_parameters?.message_id !== undefined ? String(call.body.reply_parameters.message_id) : undefined,
          thread: call.body.message_thread_id !== undefined ? String(call.body.message_thread_id) : undefined,
          revisions: 1,
        });
      } else if (call.method === 'editMessageText' && call.result !== undefined) {
        const target = out.find((m) => m.chat === String(call.body.chat_id) && m.id === String(call.body.message_id));
        if (!target) continue;
        target.text = visibleText(call.body.text, call.body.parse_mode);
        target.formatted = call.body.parse_mode === 'HTML';
        target.revisions++;
        // An edit without a keyboard removes the one the message had.
        target.choices = (call.body.reply_markup?.inline_keyboard ?? []).flat().map((b: { text: string }) => b.text);
      }
    }
    return out;
  }

  async function postUpdate(chat: 'team' | 'unlisted', text: string, entities: { type: string; offset: number; length: number }[], options: PostOptions): Promise<PostedMessage> {
    const group = GROUPS[chat];
    const message = {
      message_id: ++nextMessage,
      date: Math.floor(Date.now() / 1000),
      chat: group,
      from: PEOPLE[options.from ?? 'owner'],
      text,
      ...(entities.length ? { entities } : {}),
      ...(options.thread ? { message_thread_id: TOPIC, is_topic_message: true } : {}),
      ...(options.replyTo
        ? { reply_to_message: { message_id: Number(options.replyTo.id), date: 0, chat: group, from: BOT, text: options.replyTo.text } }
        : {}),
    };
    const update = { update_id: ++nextUpdate, message };
    track(group.id, options.thread ? TOPIC : undefined);
    await deliver(update, 'message');
    return { id: String(message.message_id), chat, thread: options.thread ? String(TOPIC) : undefined, event: update };
  }

  const driver: PlatformDriver = {
    name: 'telegram',
    capabilities: {
      buttons: true,
      groups: true,
      threads: true,
      edits: true,
      otherPeople: true,
      mentionEveryone: false,
      markup: true,
      replyReferences: true,
      privateReplies: false,
      maxTextLength: 4096,
      failingPosts: true,
      idempotentPosts: false,
      // Telegram sets no hard limit, but the clicker's client spins until the answer: it must come at once.
      ackDeadlineMs: 3000,
    },
    get model() {
      return running.model;
    },
    get tools() {
      return running.tools;
    },

    async start() {
      api = await startFakeTelegram();
      const log = pino({ level: process.env.TEST_LOG_LEVEL ?? 'silent' });
      running = await startConformanceApp({
        places: {
          connector: 'telegram',
          users: [`telegram:${PEOPLE.owner.id}`, `telegram:${PEOPLE.helper.id}`],
          approvers: [`telegram:${PEOPLE.owner.id}`],
          primaryChat: String(PEOPLE.owner.id),
          team: String(GROUPS.team.id),
        },
        connectors: () => [createTelegramConnector({ token: TOKEN, apiRoot: api.apiRoot, log, pollTimeoutSeconds: 0 })],
      });
    },

    async stop() {
      await running?.stop();
      await api?.close();
    },

    async reset() {
      await settle(running.app, conversations);
      setStreaming(running.app, false);
      running.model.reset();
      running.tools.runs.length = 0;
      api.calls.length = 0;
      deliveries = [];
    },

    address: (person) => `telegram:${PEOPLE[person].id}`,

    async dm(from, text) {
      const user = PEOPLE[from];
      const chat = { id: user.id, type: 'private', first_name: user.first_name, username: user.username };
      const command = /^\/\w+/.exec(text);
      const message = {
        message_id: ++nextMessage,
        date: Math.floor(Date.now() / 1000),
        chat,
        from: user,
        text,
        ...(command ? { entities: [{ type: 'bot_command', offset: 0, length: command[0].length }] } : {}),
      };
      const update = { update_id: ++nextUpdate, message };
      track(user.id);
      await deliver(update, 'message');
      return { id: String(message.message_id), chat: `dm:${from}`, event: update };
    },

    async post(chat, text, options: PostOptions = {}) {
      if (options.mentionEveryone) throw new Error('Telegram has no @everyone mention');
      // A command is addressed to the bot by its name after it (`/status@bot`); anything else by an @mention.
      const command = /^\/\w+/.exec(text)?.[0];
      if (command && options.mention) {
        const addressed = `${command}@${BOT.username}`;
        return postUpdate(chat, `${addressed}${text.slice(command.length)}`, [{ type: 'bot_command', offset: 0, length: addressed.length }], options);
      }
      const handle = options.mention ? `@${BOT.username}` : options.mentionOther ? '@someone_else' : undefined;
      const body = handle ? `${handle} ${text}` : text;
      return postUpdate(chat, body, handle ? [{ type: 'mention', offset: 0, length: handle.length }] : [], options);
    },

    async click(message, label, as = 'owner'): Promise<ClickResult> {
      const sent = record().find((m) => m.id === message.id);
      const button = sent?.buttons.find((b) => b.text === label);
      if (!sent || !button) throw new Error(`no button "${label}" on message ${message.id}`);
      const chatId = Number(sent.chat);
      const chat = chatId < 0 ? Object.values(GROUPS).find((g) => g.id === chatId)! : { id: chatId, type: 'private' };
      const update = {
        update_id: ++nextUpdate,
        callback_query: {
          id: `cq-${nextUpdate}`,
          from: PEOPLE[as],
          chat_instance: '1',
          data: button.callback_data,
          message: { message_id: Number(message.id), date: 0, chat, from: BOT, text: sent.text },
        },
      };
      const { handout, ack } = await deliver(update, 'click');
      // A callback query's answer shows only to the person who clicked.
      return { notice: ack.body.text, private: true, ms: ack.at! - handout.at! };
    },

    async redeliver(message: PostedMessage) {
      await deliver(message.event as Update, 'message', { again: true });
    },

    sent(chat) {
      const id = String(chatIdOf(chat));
      return record()
        .filter((m) => m.chat === id)
        .map(({ chat: _chat, buttons: _buttons, ...message }) => message);
    },

    ackTimings(): AckTiming[] {
      return deliveries.flatMap((d) => {
        const found = acknowledgement(d);
        return found ? [{ kind: d.kind, ms: found.ack.at! - found.handout.at! }] : [];
      });
    },

    failPost({ after, applied }) {
      if (applied) throw new Error('Telegram takes no key: a post whose answer was lost cannot be found again');
      // grammY's auto-retry retries 429s and 5xx itself; a dropped connection comes back to Parlor at once.
      api.failNext('sendMessage', 'drop', 1, after);
    },

    rejectNextMarkup() {
      api.failNext('sendMessage', { ok: false, error_code: 400, description: 'Bad Request: can\'t parse entities: Unsupported start tag "b" at byte offset 0' });
    },

    setStreaming(on) {
      setStreaming(running.app, on);
    },

    idle(chat, options = {}) {
      const thread = options.thread && chat === 'team' ? String(TOPIC) : undefined;
      return running.app.waitForIdle(chatConversationId(PERSONA, 'telegram', String(chatIdOf(chat)), thread), 15_000);
    },
  };
  return driver;
}
