// Each fake platform as the fault run sees it: people posting and clicking, the platform delivering again what it
// was not sure arrived, and what the bot has in each chat now (edits applied), with how often each message was created.
import type { FakeDiscord } from '../support/fake-discord.ts';
import type { FakeSlack } from '../support/fake-slack.ts';
import { imChannelFor } from '../support/fake-slack-payloads.ts';
import type { FakeTelegram } from '../support/fake-telegram.ts';

export type PlatformName = 'telegram' | 'discord' | 'slack';

/** The chat name `messages` takes for the persona's group. */
export const GROUP = 'group';
/** The Telegram group the persona answers in when mentioned. */
export const TELEGRAM_GROUP = '-1009000';
/** The Slack channel the persona answers in when mentioned. */
export const SLACK_CHANNEL = 'C0FAULTS';
/** The bot's username in the fake Bot API (its getMe). */
const TELEGRAM_BOT = 'parlor_test_bot';

export interface BotMessage {
  id: string;
  text: string;
  buttons: { label: string; data: string }[];
  /** When the platform created it. */
  at: number;
}

export interface Platform {
  name: PlatformName;
  /** Posts a DM from the person; `accepted` is what the platform knows (true: the bot took it). */
  dm(person: string, text: string): Promise<{ ref: string; accepted: boolean | 'unknown' }>;
  /** Posts in the persona's group, mentioning the bot (where the platform has groups here). */
  mention?(person: string, text: string): Promise<{ ref: string; accepted: boolean | 'unknown' }>;
  /**
   * Each mention is answered in a thread of its own (a conversation of its own), so the group's replies have no
   * order across mentions to keep.
   */
  threadPerMention?: true;
  /** What the bot has in the person's DM (or, for `GROUP`, in the group) now, oldest first. */
  messages(person: string): BotMessage[];
  click(person: string, message: BotMessage, label: string): Promise<void>;
  /**
   * Delivers one of the messages posted earlier again (a duplicate delivery), one that Parlor took the first time
   * (`taken`, asked with the event's id): a message whose first delivery never reached it (sent into a connection that
   * died) would come as a late first delivery, and be answered after newer ones, rightly.
   */
  duplicate(pick: (count: number) => number, taken: (ref: string) => Promise<boolean>): Promise<boolean>;
  /** Drops the bot's connection (gateway / socket); false where there is none. */
  disconnect(): boolean;
}

export function telegramPlatform(fake: FakeTelegram, firstUpdate = 1): Platform {
  let nextUpdate = firstUpdate;
  let nextMessage = 10_000;
  const posted: { update_id: number }[] = [];
  const person = (id: string) => ({ id: Number(id), is_bot: false, first_name: `P${id}` });
  const parse = (markup: unknown) => (typeof markup === 'string' ? JSON.parse(markup) : markup) as { inline_keyboard?: { text: string; callback_data: string }[][] } | undefined;
  return {
    name: 'telegram',
    async dm(id, text) {
      const update = {
        update_id: nextUpdate++,
        message: { message_id: nextMessage++, date: Math.floor(Date.now() / 1000), chat: { id: Number(id), type: 'private' }, from: person(id), text },
      };
      posted.push(update);
      // Handed out until a getUpdates offset acknowledges it, as Telegram does.
      fake.queueUpdates(update);
      return { ref: String(update.update_id), accepted: true };
    },
    async mention(id, text) {
      const handle = `@${TELEGRAM_BOT}`;
      const update = {
        update_id: nextUpdate++,
        message: {
          message_id: nextMessage++,
          date: Math.floor(Date.now() / 1000),
          chat: { id: Number(TELEGRAM_GROUP), type: 'supergroup', title: 'Faults' },
          from: person(id),
          text: `${handle} ${text}`,
          entities: [{ type: 'mention', offset: 0, length: handle.length }],
        },
      };
      posted.push(update);
      fake.queueUpdates(update);
      return { ref: String(update.update_id), accepted: true };
    },
    messages(who) {
      const id = who === GROUP ? TELEGRAM_GROUP : who;
      const byId = new Map<number, BotMessage>();
      for (const call of fake.calls) {
        if (String(call.body.chat_id) !== id || !call.result || call.result === 'dropped') continue;
        if (call.method === 'sendMessage') {
          const result = call.result as { message_id: number };
          const buttons = (parse(call.body.reply_markup)?.inline_keyboard ?? []).flat().map((b) => ({ label: b.text, data: b.callback_data }));
          byId.set(result.message_id, { id: String(result.message_id), text: String(call.body.text), buttons, at: call.at ?? 0 });
        } else if (call.method === 'editMessageText' || call.method === 'editMessageReplyMarkup') {
          const message = byId.get(Number(call.body.message_id));
          if (!message) continue;
          if (call.method === 'editMessageText') message.text = String(call.body.text);
          message.buttons = (parse(call.body.reply_markup)?.inline_keyboard ?? []).flat().map((b) => ({ label: b.text, data: b.callback_data }));
        } else if (call.method === 'deleteMessage') byId.delete(Number(call.body.message_id));
      }
      return [...byId.values()];
    },
    async click(id, message, label) {
      const button = message.buttons.find((b) => b.label === label);
      if (!button) throw new Error(`no button ${label} on ${message.id}`);
      fake.queueUpdates({
        update_id: nextUpdate++,
        callback_query: {
          id: `cb${nextUpdate}`,
          from: person(id),
          chat_instance: `ci${id}`,
          data: button.data,
          message: { message_id: Number(message.id), date: Math.floor(Date.now() / 1000), chat: { id: Number(id), type: 'private' }, text: message.text },
        },
      } as never);
    },
    async duplicate(pick) {
      if (!posted.length) return false;
      // Handed out once more, whatever the offset (Telegram re-delivers what it was not sure arrived). Every update is
      // taken in the end (Telegram keeps one until a webhook answers it), so any will do.
      fake.pushUpdates(posted[pick(posted.length)]);
      return true;
    },
    disconnect: () => false,
  };
}

export function discordPlatform(fake: FakeDiscord): Platform {
  const posted: string[] = [];
  const created = (channel: string) => new Map(fake.callsOf('POST /channels/:id/messages').filter((c) => c.path.includes(channel) && c.result).map((c) => [(c.result as { id: string }).id, c.at]));
  return {
    name: 'discord',
    async dm(username, text) {
      const live = fake.sessions().length > 0;
      const message = fake.sendDm({ from: username, content: text });
      posted.push(message.id);
      return { ref: message.id, accepted: live ? 'unknown' : false };
    },
    async mention(username, text) {
      const live = fake.sessions().length > 0;
      const message = fake.sendGuildMessage({ channel: 'general', from: username, content: `<@${fake.bot.id}> ${text}` });
      posted.push(message.id);
      return { ref: message.id, accepted: live ? 'unknown' : false };
    },
    messages(username) {
      const channel = username === GROUP ? fake.channel('general').id : fake.dmChannel(username);
      const at = created(channel);
      return fake.messages(channel).map((m) => ({
        id: m.id,
        text: m.content,
        buttons: (m.components ?? []).flatMap((row: any) => row.components ?? []).filter((c: any) => !c.disabled && c.custom_id).map((c: any) => ({ label: String(c.label), data: String(c.custom_id) })),
        at: at.get(m.id) ?? 0,
      }));
    },
    async click(username, message, label) {
      const button = message.buttons.find((b) => b.label === label);
      if (!button) throw new Error(`no button ${label} on ${message.id}`);
      await fake.click({ message: message.id, customId: button.data, from: username, timeoutMs: 10_000 }).catch(() => {});
    },
    async duplicate(pick, taken) {
      if (!posted.length) return false;
      const id = posted[pick(posted.length)];
      if (!(await taken(id))) return false;
      const frame = fake.frames.find((f: any) => f.t === 'MESSAGE_CREATE' && f.d?.id === id) as { d: unknown } | undefined;
      if (!frame) return false;
      return fake.dispatch('MESSAGE_CREATE', frame.d) > 0;
    },
    disconnect() {
      fake.disconnect();
      return true;
    },
  };
}

export function slackPlatform(fake: FakeSlack): Platform {
  const posted: Awaited<ReturnType<FakeSlack['dm']>>[] = [];
  const created = () => new Map(fake.callsOf('chat.postMessage').filter((c) => typeof c.response === 'object' && c.response.ok).map((c) => [String((c.response as { ts: string }).ts), c.at]));
  /**
   * Slack retries an event it got no ack for three times: at once, after a minute and after five. Here sooner (1 s,
   * 20 s, 40 s), yet past the longest time the run leaves no socket open (a process stopped for 15 s, then restarted).
   */
  async function deliver(first: Awaited<ReturnType<FakeSlack['dm']>>): Promise<boolean> {
    let delivery = first;
    for (const waitMs of [1000, 20_000, 40_000]) {
      if (delivery.acked) break;
      await new Promise((r) => setTimeout(r, waitMs));
      delivery = await fake.redeliver(delivery, { retryReason: 'timeout', timeoutMs: 5000 });
    }
    return delivery.acked;
  }
  return {
    name: 'slack',
    async dm(user, text) {
      const delivery = await fake.dm({ user, text });
      posted.push(delivery);
      const accepted = await deliver(delivery);
      return { ref: String(delivery.envelope.payload.event_id ?? ''), accepted };
    },
    async mention(user, text) {
      // Two envelopes for one post (app_mention and message), each retried on its own until acknowledged.
      const { mention, message } = await fake.mention({ user, channel: SLACK_CHANNEL, text });
      posted.push(mention, message);
      const acked = await Promise.all([deliver(mention), deliver(message)]);
      return { ref: String(mention.envelope.payload.event.ts), accepted: acked.some(Boolean) };
    },
    threadPerMention: true,
    messages(user) {
      const at = created();
      return fake.messages(user === GROUP ? SLACK_CHANNEL : imChannelFor([user])).map((m) => ({
        id: m.ts,
        text: m.text ?? '',
        buttons: (m.blocks ?? [])
          .filter((b: any) => b.type === 'actions')
          .flatMap((b: any) => b.elements ?? [])
          .filter((e: any) => e.type === 'button')
          .map((e: any) => ({ label: String(e.text?.text ?? ''), data: String(e.action_id) })),
        at: at.get(m.ts) ?? 0,
      }));
    },
    async click(user, message, label) {
      await fake.click({ message: { channel: imChannelFor([user]), ts: message.id }, label, user }).catch(() => {});
    },
    async duplicate(pick, taken) {
      if (!posted.length) return false;
      const delivery = posted[pick(posted.length)];
      // The message's key (its channel and ts) is what the connector records, not the envelope's event id.
      if (!(await taken(String(delivery.envelope.payload.event?.ts ?? '')))) return false;
      await fake.redeliver(delivery, { retryReason: 'http_timeout', timeoutMs: 5000 });
      return true;
    },
    disconnect() {
      fake.disconnect({ abrupt: true });
      return true;
    },
  };
}
