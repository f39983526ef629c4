// Slack for the conformance suite: the real connector on Bolt against the fake Slack (test/support/fake-slack.ts),
// in Socket Mode (envelopes over the fake's WebSocket, acked there) or HTTP mode (signed requests to Parlor's own
// HTTP server, a 200 being the ack).
import pino from 'pino';
import { createSlackConnector, EVENTS_PATH } from '../../connectors/slack/index.ts';
import { chatConversationId } from '../../src/conversation-id.ts';
import { startFakeSlack, type Delivery, type FakeSlack, type SlackEphemeral, type SlackMessage } from '../support/fake-slack.ts';
import { until } from '../support/until.ts';
import { PERSONA, setStreaming, settle, startConformanceApp, type ConformanceApp } from './app.ts';
import type { AckTiming, BotMessage, ChatName, ClickResult, Person, PlatformDriver, PostedMessage, PostOptions } from './driver.ts';

export type SlackMode = 'socket' | 'http';

const SIGNING_SECRET = 'conformance-signing-secret';
const PEOPLE: Record<Person, { id: string; name: string; real_name: string }> = {
  owner: { id: 'U0OWNER', name: 'ana', real_name: 'Ana' },
  helper: { id: 'U0HELPER', name: 'bo', real_name: 'Bo' },
  stranger: { id: 'U0STRANGER', name: 'eve', real_name: 'Eve' },
};
const CHANNELS = { team: 'C0TEAM', unlisted: 'C0ELSEWHERE' } as const;

/** The bot's DM channel with a person (the fake's: D + the user id without its U). */
const dmChannel = (person: Person) => `D${PEOPLE[person].id.slice(1)}`;
const channelOf = (chat: ChatName) => (chat.startsWith('dm:') ? dmChannel(chat.slice(3) as Person) : CHANNELS[chat as keyof typeof CHANNELS]);

/** What a person reads of mrkdwn: links as their labels, entities decoded. */
export function visibleMrkdwn(text: string): string {
  return text
    .replace(/<(?:https?|mailto):[^<>|]+\|([^<>]+)>/g, '$1')
    .replace(/<((?:https?|mailto):[^<>|]+)>/g, '$1')
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&amp;/g, '&');
}

/** What a message shows: its blocks' sections when it has blocks (the text is then only the notification), else its text. */
function shownText(m: { text?: string; blocks?: any[] }): string {
  const sections = (m.blocks ?? []).filter((b) => b.type === 'section').map((b) => b.text?.text ?? '');
  return visibleMrkdwn(m.blocks?.length ? sections.join('\n') : (m.text ?? ''));
}

const buttonsOf = (blocks: any[] | undefined): string[] =>
  (blocks ?? []).flatMap((b) => (b.type === 'actions' ? b.elements : [])).filter((e: any) => e.type === 'button').map((e: any) => e.text.text);

export function createSlackDriver(mode: SlackMode): PlatformDriver {
  let fake: FakeSlack;
  let running: ConformanceApp;
  let deliveries: { delivery: Delivery; kind: AckTiming['kind'] }[] = [];
  /** Ephemerals that answered a click (a click's notice, not a message of the chat). */
  const notices = new Set<string>();
  const conversations = new Set<string>();
  /** The thread `thread: true` posts in this scenario: a person's message in the team channel. */
  let threadRoot: string | undefined;
  const log = pino({ level: process.env.TEST_LOG_LEVEL ?? 'silent' });

  const track = (channel: string, thread?: string) => {
    const id = chatConversationId(PERSONA, 'slack', channel, thread);
    conversations.add(id);
    return id;
  };

  function record(delivery: Delivery, kind: AckTiming['kind']): Delivery {
    deliveries.push({ delivery, kind });
    if (!delivery.acked) throw new Error(`Slack ${delivery.envelope.type} ${delivery.envelope.envelope_id} was not acknowledged (status ${delivery.status ?? 'none'})`);
    return delivery;
  }

  function toBotMessage(m: SlackMessage): BotMessage {
    return { id: m.ts, text: shownText(m), choices: buttonsOf(m.blocks), formatted: m.mrkdwn !== false, thread: m.thread_ts, revisions: 1 + m.edits };
  }

  function ephemeralMessage(e: SlackEphemeral): BotMessage {
    const person = (Object.keys(PEOPLE) as Person[]).find((p) => PEOPLE[p].id === e.user);
    return { id: e.message_ts, text: shownText(e), choices: buttonsOf(e.blocks), formatted: true, thread: e.thread_ts, visibleTo: person, revisions: 1 };
  }

  async function rootOfThread(): Promise<string> {
    if (threadRoot) return threadRoot;
    const root = record(await fake.channelMessage({ user: PEOPLE.helper.id, channel: CHANNELS.team, text: 'a thread to talk in' }), 'message');
    threadRoot = root.envelope.payload.event.ts as string;
    return threadRoot;
  }

  const driver: PlatformDriver = {
    name: `slack (${mode === 'socket' ? 'Socket Mode' : 'HTTP events'})`,
    capabilities: {
      buttons: true,
      groups: true,
      threads: true,
      mentionOpensThread: true,
      edits: true,
      otherPeople: true,
      mentionEveryone: true,
      // Slack never rejects mrkdwn: there is no markup it refuses to fall back from.
      markup: false,
      replyReferences: false,
      privateReplies: true,
      maxTextLength: 4000,
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
      fake = await startFakeSlack({ users: Object.fromEntries(Object.values(PEOPLE).map((p) => [p.id, { name: p.name, real_name: p.real_name }])) });
      running = await startConformanceApp({
        places: {
          connector: 'slack',
          users: [`slack:${PEOPLE.owner.id}`, `slack:${PEOPLE.helper.id}`],
          approvers: [`slack:${PEOPLE.owner.id}`],
          primaryChat: PEOPLE.owner.id,
          team: CHANNELS.team,
        },
        http: mode === 'http',
        connectors: () => [
          createSlackConnector({
            botToken: fake.botToken,
            ...(mode === 'socket' ? { appToken: fake.appToken } : { signingSecret: SIGNING_SECRET }),
            apiUrl: fake.apiUrl,
            log,
          }),
        ],
      });
      if (mode === 'http') fake.deliverOverHttp({ url: `http://127.0.0.1:${running.app.http!.port}${EVENTS_PATH}`, signingSecret: SIGNING_SECRET });
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
      fake.reset();
      deliveries = [];
      notices.clear();
      threadRoot = undefined;
    },

    address: (person) => `slack:${PEOPLE[person].id}`,

    async dm(from, text) {
      const delivery = record(await fake.dm({ user: PEOPLE[from].id, text }), 'message');
      track(dmChannel(from));
      return { id: delivery.envelope.payload.event.ts, chat: `dm:${from}`, event: delivery };
    },

    async post(chat, text, options: PostOptions = {}) {
      const channel = CHANNELS[chat];
      const user = PEOPLE[options.from ?? 'owner'].id;
      // Slack has no quoting reply: answering a bot message is posting in its thread.
      const thread = options.replyTo ? (options.replyTo.thread ?? options.replyTo.id) : options.thread ? await rootOfThread() : undefined;
      let delivery: Delivery;
      if (options.mention) {
        delivery = (await fake.mention({ user, channel, text, thread_ts: thread })).mention;
        record(fake.deliveries.find((d) => d.envelope.payload?.event?.type === 'message' && d.envelope.payload.event.ts === delivery.envelope.payload.event.ts)!, 'message');
      } else {
        const prefix = options.mentionEveryone ? '<!channel> ' : options.mentionOther ? `<@${PEOPLE.helper.id}> ` : '';
        delivery = await fake.channelMessage({ user, channel, text: prefix + text, thread_ts: thread });
      }
      record(delivery, 'message');
      const ts = delivery.envelope.payload.event.ts as string;
      if (chat === 'team') track(channel, thread ?? (options.mention ? ts : undefined));
      return { id: ts, chat, thread, event: delivery };
    },

    async click(message, label, as = 'owner'): Promise<ClickResult> {
      const channel = [...Object.values(CHANNELS), ...(Object.keys(PEOPLE) as Person[]).map(dmChannel)].find((c) => fake.message(c, message.id));
      if (!channel) throw new Error(`no message ${message.id} to click`);
      const user = PEOPLE[as].id;
      const before = fake.ephemerals(channel, user).length;
      const delivery = record(await fake.click({ message: { channel, ts: message.id }, label, user, stale: true }), 'click');
      // What the clicker is told comes after the acknowledgement, as a message only they see.
      const notice = await until(() => fake.ephemerals(channel, user)[before], `the notice to ${as} after clicking "${label}"`);
      notices.add(notice.message_ts);
      return { notice: notice.text, private: true, ms: delivery.latencyMs! };
    },

    async redeliver(message: PostedMessage) {
      record(await fake.redeliver(message.event as Delivery), 'message');
    },

    sent(chat) {
      const channel = channelOf(chat);
      const messages = fake.messages(channel).map(toBotMessage);
      const ephemerals = fake.ephemerals(channel).filter((e) => !notices.has(e.message_ts)).map(ephemeralMessage);
      return [...messages, ...ephemerals].sort((a, b) => Number(a.id) - Number(b.id));
    },

    ackTimings(): AckTiming[] {
      return deliveries.filter((d) => d.delivery.acked).map((d) => ({ kind: d.kind, ms: d.delivery.latencyMs! }));
    },

    failPost({ after, applied }) {
      // Parlor's poster has web-api retry nothing: a post whose answer was lost may be in the chat.
      fake.failNext('chat.postMessage', { status: 503, after, afterDoing: applied });
    },

    rejectNextMarkup() {
      throw new Error('Slack does not reject mrkdwn');
    },

    setStreaming(on) {
      setStreaming(running.app, on);
    },

    async idle(chat, options = {}) {
      const channel = channelOf(chat);
      if (options.thread && chat === 'team') return running.app.waitForIdle(chatConversationId(PERSONA, 'slack', channel, threadRoot), 15_000);
      // A channel's mentions are each a conversation of their own (the thread opened on them): all of them.
      const prefix = chatConversationId(PERSONA, 'slack', channel);
      const ids = [...conversations].filter((id) => id === prefix || id.startsWith(`${prefix}:`));
      for (const id of ids.length ? ids : [prefix]) await running.app.waitForIdle(id, 15_000);
    },
  };
  return driver;
}
