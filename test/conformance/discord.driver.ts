// Discord for the conformance suite: the real connector (discord.js on its gateway and REST) against the fake
// Discord (test/support/fake-discord.ts). People write DMs, post in a guild channel and its thread, and click
// buttons through the fake; what the bot sent is read from the fake's store, edits applied. Discord acknowledges
// nothing on the gateway: a message counts as acknowledged once the connector has handed it to the core and the core
// has taken it, which the driver sees at the connector's boundary.
import pino from 'pino';
import { createDiscordConnector } from '../../connectors/discord/index.ts';
import type { Connector, InboundHandler } from '../../src/connector.ts';
import { chatConversationId } from '../../src/conversation-id.ts';
import { startFakeDiscord, type ApiMessage, type FakeDiscord } from '../support/fake-discord.ts';
import { until } from '../support/until.ts';
import { PERSONA, setStreaming, settle, startConformanceApp, type ConformanceApp } from './app.ts';
import type { AckTiming, BotMessage, ChatName, ClickResult, Person, PlatformDriver, PostedMessage, PostOptions } from './driver.ts';

const USERNAMES: Record<Person, string> = { owner: 'ana', helper: 'bo', stranger: 'eve' };
const CHANNELS = { team: 'team', unlisted: 'elsewhere' } as const;
/** The thread under `team` that `thread: true` posts in (started by the first such post). */
const THREAD = 'conformance-thread';
const EPHEMERAL = 1 << 6;

/** What a person reads of a message Discord renders as Markdown, and whether it used any. */
export function readDiscordMarkdown(content: string): { text: string; formatted: boolean } {
  let formatted = false;
  const mark = (text: string) => ((formatted = true), text);
  const text = content
    .replace(/(?<!\\)```[^\n`]*\n([\s\S]*?)\n?```/g, (_m, code: string) => mark(code))
    .replace(/(?<!\\)`([^`\n]+)`/g, (_m, code: string) => mark(code))
    .replace(/(?<!\\)\*\*(.+?)\*\*/g, (_m, t: string) => mark(t))
    .replace(/(?<!\\)__(.+?)__/g, (_m, t: string) => mark(t))
    .replace(/(?<!\\)~~(.+?)~~/g, (_m, t: string) => mark(t))
    .replace(/(?<!\\)\|\|(.+?)\|\|/g, (_m, t: string) => mark(t))
    .replace(/(?<![\\*\w])\*([^*\n]+)\*(?!\w)/g, (_m, t: string) => mark(t))
    .replace(/(?<![\\_\w])_([^_\n]+)_(?!\w)/g, (_m, t: string) => mark(t))
    .replace(/^(?:#{1,3}|-#) (.*)$/gm, (_m, t: string) => mark(t))
    .replace(/(?<!\\)\[([^\]\n]+)\]\((\S+?)\)/g, (_m, t: string) => mark(t))
    .replace(/\\([^\w\s])/g, '$1');
  return { text, formatted };
}

interface Handled {
  event: { externalId: string; kind: string };
  at: number;
}

export function createDiscordDriver(): PlatformDriver {
  let fake: FakeDiscord;
  let running: ConformanceApp;
  /** Message ids the bot had sent before the last reset (left out of `sent`). */
  let before = new Set<string>();
  let callsBefore = 0;
  let handled: Handled[] = [];
  let clicks: ClickResult[] = [];
  let messageAcks: AckTiming[] = [];
  let threadId: string | undefined;
  const conversations = new Set<string>();

  let inner: Connector;
  let timed: InboundHandler;
  const log = pino({ level: process.env.TEST_LOG_LEVEL ?? 'silent' });
  const connect = () => createDiscordConnector({ token: fake.token, apiUrl: fake.apiRoot, messageContent: true, log });

  /**
   * The connector as the app holds it: the real one, with the moment the core took each event noted. A redelivery
   * swaps in a new instance (see `redeliver`).
   */
  const connector: Connector = {
    id: 'discord',
    get capabilities() {
      return inner.capabilities;
    },
    async start(handler) {
      timed = async (event) => {
        const result = await handler(event);
        handled.push({ event, at: Date.now() });
        return result;
      };
      await inner.start(timed);
    },
    stop: () => inner.stop(),
    send: (message) => inner.send(message),
    edit: (...args) => inner.edit!(...args),
    react: (...args) => inner.react!(...args),
    typing: (...args) => inner.typing!(...args),
    download: (...args) => inner.download!(...args),
    draft: (target) => inner.draft!(target),
    status: () => inner.status!(),
  };

  const channelIds = (chat: ChatName): string[] => {
    if (chat.startsWith('dm:')) return [fake.dmChannel(USERNAMES[chat.slice(3) as Person])];
    const id = fake.channel(CHANNELS[chat as 'team' | 'unlisted']).id;
    return chat === 'team' && threadId ? [id, threadId] : [id];
  };

  const conversationOf = (chat: ChatName, thread?: string) => {
    const id = chat.startsWith('dm:') ? fake.dmChannel(USERNAMES[chat.slice(3) as Person]) : fake.channel(CHANNELS[chat as 'team' | 'unlisted']).id;
    return chatConversationId(PERSONA, 'discord', id, thread);
  };

  /** The message as first posted: its buttons stay clickable by a client that has not seen them go (a stale click). */
  const postedComponents = (id: string): any[] => {
    const call = fake.calls.find((c) => c.method === 'POST' && /\/messages$/.test(c.path) && (c.result as { id?: string } | undefined)?.id === id);
    return call?.body.components ?? [];
  };

  const choicesOf = (components: any[]): { label: string; customId: string; values?: string[] }[] =>
    components.flatMap((row) =>
      (row.components ?? []).flatMap((c: any) =>
        c.type === 3 ? (c.options ?? []).map((o: any) => ({ label: o.label, customId: c.custom_id, values: [o.value] })) : [{ label: c.label, customId: c.custom_id }],
      ),
    );

  function read(message: ApiMessage): BotMessage {
    const channel = fake.channel(message.channel_id);
    const { text, formatted } = readDiscordMarkdown(message.content);
    const edits = fake.calls.slice(callsBefore).filter((c) => c.method === 'PATCH' && c.path === `/channels/${message.channel_id}/messages/${message.id}` && c.status === 200);
    return {
      id: message.id,
      text,
      choices: choicesOf(message.components).map((c) => c.label),
      formatted,
      replyTo: message.message_reference?.message_id,
      thread: channel.type === 11 || channel.type === 12 ? channel.id : undefined,
      revisions: 1 + edits.length,
    };
  }

  /** Posts through the fake and waits until the core has taken the message. */
  async function delivered(post: () => ApiMessage, chat: ChatName, thread?: string): Promise<PostedMessage> {
    const from = handled.length;
    const t0 = Date.now();
    const message = post();
    await until(() => handled.slice(from).some((h) => h.event.externalId === message.id), `the connector to hand message ${message.id} to the core`);
    messageAcks.push({ kind: 'message', ms: handled.slice(from).find((h) => h.event.externalId === message.id)!.at - t0 });
    const frame = fake.frames.find((f) => f.direction === 'out' && f.t === 'MESSAGE_CREATE' && f.d?.id === message.id);
    return { id: message.id, chat, thread, event: frame?.d ?? message };
  }

  const driver: PlatformDriver = {
    name: 'discord',
    capabilities: {
      buttons: true,
      groups: true,
      threads: true,
      edits: true,
      otherPeople: true,
      mentionEveryone: true,
      markup: true,
      replyReferences: true,
      // Only an interaction's answer is ephemeral on Discord; a reply to a message is the channel's.
      privateReplies: false,
      maxTextLength: 2000,
      failingPosts: true,
      idempotentPosts: true,
      ackDeadlineMs: 3000,
    },
    get model() {
      return running.model;
    },
    get tools() {
      return running.tools;
    },

    async start() {
      fake = await startFakeDiscord({
        users: [
          { username: 'ana', global_name: 'Ana' },
          { username: 'bo', global_name: 'Bo' },
          { username: 'eve', global_name: 'Eve' },
        ],
        guilds: [
          {
            name: 'Conformance',
            channels: [{ name: 'Text Channels', type: 4 }, { name: 'team', parent: 'Text Channels' }, { name: 'elsewhere', parent: 'Text Channels' }],
            roles: [{ name: 'moderators', mentionable: true }],
          },
        ],
      });
      inner = connect();
      const id = (person: Person) => fake.user(USERNAMES[person]).id;
      running = await startConformanceApp({
        places: {
          connector: 'discord',
          users: [`discord:${id('owner')}`, `discord:${id('helper')}`],
          approvers: [`discord:${id('owner')}`],
          // A user id: the connector opens the DM channel itself.
          primaryChat: id('owner'),
          team: fake.channel('team').id,
        },
        connectors: () => [connector],
      });
    },

    async stop() {
      await running?.stop();
      await fake?.close();
    },

    async reset() {
      await settle(running.app, conversations);
      setStreaming(running.app, false);
      running.model.reset();
      running.tools.runs.length = 0;
      before = new Set([...fake.calls.flatMap((c) => ((c.result as { id?: string } | undefined)?.id ? [(c.result as { id: string }).id] : []))]);
      callsBefore = fake.calls.length;
      handled = [];
      clicks = [];
      messageAcks = [];
    },

    address: (person) => `discord:${fake.user(USERNAMES[person]).id}`,

    async dm(from, text) {
      const chat: ChatName = `dm:${from}`;
      conversations.add(conversationOf(chat));
      return delivered(() => fake.sendDm({ from: USERNAMES[from], content: text }), chat);
    },

    async post(chat, text, options: PostOptions = {}) {
      const prefix = options.mention
        ? `<@${fake.bot.id}> `
        : options.mentionOther
          ? `<@${fake.user(USERNAMES.helper).id}> `
          : options.mentionEveryone
            ? `@everyone <@&${fake.guild().botRoleId}> `
            : '';
      const posted = await delivered(
        () =>
          fake.sendGuildMessage({
            channel: CHANNELS[chat],
            thread: options.thread ? THREAD : undefined,
            from: USERNAMES[options.from ?? 'owner'],
            content: `${prefix}${text}`,
            message_reference: options.replyTo?.id,
          }),
        chat,
        undefined,
      );
      if (options.thread) {
        threadId = fake.message(posted.id)!.channel_id;
        posted.thread = threadId;
      }
      conversations.add(conversationOf(chat, posted.thread));
      return posted;
    },

    async click(message, label, as = 'owner'): Promise<ClickResult> {
      const now = fake.message(message.id);
      const live = choicesOf(now?.components ?? []).find((c) => c.label === label);
      const choice = live ?? choicesOf(postedComponents(message.id)).find((c) => c.label === label);
      if (!choice) throw new Error(`no button "${label}" on message ${message.id}`);
      const callback = await fake.click({ message: message.id, customId: choice.customId, values: choice.values, from: USERNAMES[as], unchecked: !live });
      // The notice follows the acknowledgement, shown to the clicker alone.
      const interaction = fake.interactions.find((i) => i.id === callback.interactionId)!;
      const followUp = await until(() => (interaction.followups[0] ? fake.message(interaction.followups[0]) : undefined), `the notice of the click on "${label}"`);
      const result = { notice: followUp.content, private: (followUp.flags & EPHEMERAL) !== 0, ms: callback.latencyMs };
      clicks.push(result);
      return result;
    },

    // discord.js drops a MESSAGE_CREATE for a message it has in its cache, so within one process a repeat never
    // reaches the connector. The repeat that matters comes after a restart (nothing cached, the core's dedupe is all
    // there is): the connector is started again, as a new process would, and the event is dispatched to it.
    async redeliver(message: PostedMessage) {
      await inner.stop();
      inner = connect();
      await inner.start(timed);
      const from = handled.length;
      const id = (message.event as { id: string }).id;
      const t0 = Date.now();
      fake.dispatch('MESSAGE_CREATE', message.event);
      await until(() => handled.slice(from).find((h) => h.event.externalId === id), `message ${id} to be handed to the core again`);
      messageAcks.push({ kind: 'message', ms: handled.slice(from).find((h) => h.event.externalId === id)!.at - t0 });
    },

    sent(chat) {
      return channelIds(chat)
        .flatMap((id) => fake.messages(id))
        // Ephemeral answers to clicks are the clicker's notices (see `click`), not messages of the chat.
        .filter((m) => !before.has(m.id) && !(m.flags & EPHEMERAL))
        .sort((a, b) => (BigInt(a.id) < BigInt(b.id) ? -1 : 1))
        .map(read);
    },

    ackTimings(): AckTiming[] {
      return [...messageAcks, ...clicks.map((c) => ({ kind: 'click' as const, ms: c.ms }))];
    },

    failPost({ after, applied }) {
      const route = 'POST /channels/:id/messages';
      if (after) fake.failNext(route, { slowMs: 0 }, after);
      // discord.js tries a 5xx three more times itself.
      fake.failNext(route, { status: 502, applied }, 4);
    },

    rejectNextMarkup() {
      fake.failNext('POST /channels/:id/messages', {
        status: 400,
        body: { message: 'Invalid Form Body', code: 50035, errors: { content: { _errors: [{ code: 'CONTENT_INVALID', message: 'The message content is invalid.' }] } } },
      });
    },

    setStreaming(on) {
      setStreaming(running.app, on);
    },

    idle(chat, options = {}) {
      return running.app.waitForIdle(conversationOf(chat, options.thread && chat === 'team' ? threadId : undefined), 15_000);
    },
  };
  return driver;
}
