// What people post on Discord while no gateway session of the bot is connected: Discord keeps nothing for a session
// that ended, and a new one begins with nothing of the gap. The connector reads the recent chats back when a session
// starts, and what it finds is answered once each, in the order it was posted, before what the new session brings.
import { sql } from 'drizzle-orm';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { createDiscordConnector } from '../../connectors/discord/index.ts';
import type { InboundEvent, InboundHistory } from '../../src/connector.ts';
import { startFakeDiscord, type FakeDiscordOptions } from '../support/fake-discord.ts';
import { until } from '../support/until.ts';
import { atNextReady, useDiscordHarness, storedEvents } from './discord-harness.ts';

const h = useDiscordHarness();

const botTexts = (channel: string) => h.fake.messages(channel).map((m) => m.content);
const dm = (person: string) => h.fake.dmChannel(person);
const identifies = () => h.fake.frames.filter((f) => f.direction === 'in' && f.op === 2).length;
/** The texts people wrote in a conversation, in the order they were stored. */
async function storedTexts(conversation: string): Promise<string[]> {
  const rows = await h.query<{ content: { content: unknown } }>(
    sql`select content from messages where conversation_id = ${conversation} and role = 'user' order by id`,
  );
  return rows.map((r) => JSON.stringify(r.content.content));
}
/** Each of `texts` appears once in `stored`, in this order. */
function inOrder(stored: string[], texts: string[]) {
  const at = texts.map((t) => stored.findIndex((s) => s.includes(t)));
  for (const t of texts) expect(stored.filter((s) => s.includes(t)), t).toHaveLength(1);
  expect(at).toEqual([...at].sort((a, b) => a - b));
}
async function talk(person: string, text: string) {
  h.fake.sendDm({ from: person, content: text });
  await until(() => botTexts(dm(person)).includes(`echo: ${text}`), `the answer to ${text}`);
  await h.app.waitForIdle(h.conversation({ dm: person }));
}

describe('Discord: what was posted while disconnected', () => {
  it('is read back when the next process connects: stored once each and in order, before what its session brings, and answered', async () => {
    const mention = `<@${h.fake.bot.id}>`;
    await talk('ana', 'hello');
    h.fake.sendGuildMessage({ channel: 'team', from: 'bo', content: `${mention} earlier` });
    // In a channel, the model reads who wrote: the answer ends with the text.
    await until(() => botTexts('team').some((t) => t.endsWith('] earlier')), 'the answer in #team');
    await h.app.waitForIdle(h.conversation({ channel: 'team' }));
    const answeredBefore = h.llm.requests.length;

    // As soon as Discord has said READY to the new process's session, Ana writes again.
    const live = atNextReady(h.fake, () => h.fake.sendDm({ from: 'ana', content: 'live after the restart' }));
    try {
      await h.restartConnector(() => {
        // The old session ended with its process: these reach no session.
        expect(h.fake.sessions()).toEqual([]);
        h.fake.sendDm({ from: 'ana', content: 'first while down' });
        h.fake.sendDm({ from: 'ana', content: 'second while down' });
        h.fake.sendGuildMessage({ channel: 'team', from: 'bo', content: `${mention} third while down` });
        h.fake.sendGuildMessage({ channel: 'team', from: 'bo', content: 'not for the bot' });
        // Bo's first DM ever, and a post in #open where the persona never spoke: chats with no conversation yet,
        // read back because the persona is configured to hear them.
        h.fake.sendDm({ from: 'bo', content: 'first DM, while down' });
        h.fake.sendGuildMessage({ channel: 'open', from: 'ana', content: 'open channel, while down' });
      });
    } finally {
      live.restore();
    }
    expect(live.fired()).toBe(true);

    const ana = h.conversation({ dm: 'ana' });
    const team = h.conversation({ channel: 'team' });
    await until(async () => (await storedTexts(ana)).some((t) => t.includes('live after the restart')), 'the live DM stored');
    await until(() => botTexts('team').some((t) => t.endsWith('] third while down')), 'the mention posted while down answered');
    await until(() => botTexts(dm('ana')).includes('echo: live after the restart'), 'the DMs answered');
    await until(() => botTexts(dm('bo')).includes('echo: first DM, while down'), 'the first DM posted while down answered');
    await until(() => botTexts('open').some((t) => t.endsWith('] open channel, while down')), 'the post in #open answered');
    await h.app.waitForIdle(ana);
    await h.app.waitForIdle(team);

    inOrder(await storedTexts(ana), ['hello', 'first while down', 'second while down', 'live after the restart']);
    inOrder(await storedTexts(team), ['earlier', 'third while down']);
    // Read back with the rest, but not for the bot in a channel where it answers mentions only.
    expect((await storedTexts(team)).some((t) => t.includes('not for the bot'))).toBe(false);
    // What was stored before the gap, read back too, is not answered again; each message is one event.
    const asked = h.llm.requests.slice(answeredBefore).map((r) => r.lastUserText);
    expect(asked.filter((t) => t === 'hello' || t.endsWith('] earlier'))).toEqual([]);
    expect(botTexts(dm('ana')).filter((t) => t === 'echo: hello')).toHaveLength(1);
    expect(botTexts('team').filter((t) => t.endsWith('] earlier'))).toHaveLength(1);
    const stored = await storedEvents(h);
    expect(stored.length).toBe(new Set(stored).size);
    // Each message posted while down was read by a turn.
    const unread = await h.query<{ n: number }>(sql`select count(*)::int as n from messages where conversation_id in (${ana}, ${team}) and turn_id is null`);
    expect(unread[0].n).toBe(0);
  });

  it('reads back a thread started meanwhile under a chat it hears, and an older thread posted in meanwhile, before what the session brings there', async () => {
    const mention = `<@${h.fake.bot.id}>`;
    // A thread under #team that the bot never answered in: nothing of it is stored.
    h.fake.sendGuildMessage({ channel: 'team', thread: 'quiet-thread', from: 'bo', content: 'just talking' });
    await talk('ana', 'before the threads');
    const live = atNextReady(h.fake, () =>
      h.fake.sendGuildMessage({ channel: 'team', thread: 'new-thread', from: 'ana', content: `${mention} live in the new thread` }),
    );
    try {
      await h.restartConnector(() => {
        h.fake.sendGuildMessage({ channel: 'team', thread: 'new-thread', from: 'bo', content: `${mention} started while down` });
        h.fake.sendGuildMessage({ channel: 'team', thread: 'new-thread', from: 'bo', content: `${mention} and again` });
        h.fake.sendGuildMessage({ channel: 'team', thread: 'quiet-thread', from: 'bo', content: `${mention} now for the bot` });
        // Under #elsewhere, which no persona hears: not read back.
        h.fake.sendGuildMessage({ channel: 'elsewhere', thread: 'nobodys-thread', from: 'bo', content: `${mention} not heard` });
      });
    } finally {
      live.restore();
    }
    expect(live.fired()).toBe(true);
    const fresh = h.conversation({ channel: 'team', thread: 'new-thread' });
    await until(() => botTexts('new-thread').some((t) => t.endsWith('] live in the new thread')), 'the live mention in the new thread answered');
    await until(() => botTexts('quiet-thread').some((t) => t.endsWith('] now for the bot')), 'the mention in the older thread answered');
    await h.app.waitForIdle(fresh);
    inOrder(await storedTexts(fresh), ['started while down', 'and again', 'live in the new thread']);
    const quiet = await storedTexts(h.conversation({ channel: 'team', thread: 'quiet-thread' }));
    expect(quiet.some((t) => t.includes('now for the bot'))).toBe(true);
    expect(quiet.some((t) => t.includes('just talking'))).toBe(false);
    expect(h.fake.messages('nobodys-thread')).toEqual([]);
    // A gap of moments: no thread can have been archived in it, and Discord is not asked for archived ones.
    expect(h.fake.callsOf('GET /channels/:id/threads/archived/public')).toEqual([]);
  });

  it('reads back a thread Discord archived again before the bot was back, after a gap of over an hour', async () => {
    const mention = `<@${h.fake.bot.id}>`;
    await talk('ana', 'before the long gap');
    // The newest event stored is two hours old: the bot has been away that long.
    await h.query(sql`update inbound_events set received_at = now() - interval '2 hours'`);
    await h.restartConnector(() => {
      h.fake.sendGuildMessage({ channel: 'team', thread: 'archived-meanwhile', from: 'bo', content: `${mention} before it was archived` });
      // An hour without a message later, Discord archived it: not among the active threads the session brings.
      h.fake.archiveThread('archived-meanwhile');
    });
    await until(() => botTexts('archived-meanwhile').some((t) => t.endsWith('] before it was archived')), 'the mention in the archived thread answered');
    expect(h.fake.callsOf('GET /channels/:id/threads/archived/public').length).toBeGreaterThan(0);
    const stored = await storedTexts(h.conversation({ channel: 'team', thread: 'archived-meanwhile' }));
    expect(stored.filter((t) => t.includes('before it was archived'))).toHaveLength(1);
  });

  it('reads back, in a running process, a thread it knew that Discord archived during a gap of over an hour', async () => {
    const mention = `<@${h.fake.bot.id}>`;
    // A thread under #team where the bot was never mentioned, its last message from before the gap: the running client
    // knows it (with that last message), and no conversation lists it.
    h.fake.sendGuildMessage({ channel: 'team', thread: 'chatter', from: 'bo', content: 'just chatting', postedAt: Date.now() - 3 * 3600_000 });
    await talk('ana', 'before the lost session, long ago');
    await h.query(sql`update inbound_events set received_at = now() - interval '2 hours'`);
    h.fake.dropSessions();
    h.fake.sendGuildMessage({ channel: 'team', thread: 'chatter', from: 'bo', content: `${mention} while the session was lost` });
    h.fake.archiveThread('chatter');
    await until(() => botTexts('chatter').some((t) => t.endsWith('] while the session was lost')), 'the mention in the thread archived meanwhile answered', 20_000);
  });

  it('is read back after a session Discord would not let resume, in a running process', async () => {
    await talk('bo', 'before the lost session');
    const before = identifies();
    // The connection drops, and Discord lets the session go before the bot is back: the DM reaches no session.
    h.fake.dropSessions();
    h.fake.sendDm({ from: 'bo', content: 'while the session was lost' });
    await until(() => botTexts(dm('bo')).includes('echo: while the session was lost'), 'the answer to the DM posted while the session was lost', 20_000);
    expect(identifies()).toBe(before + 1);
    await h.app.waitForIdle(h.conversation({ dm: 'bo' }));
    inOrder(await storedTexts(h.conversation({ dm: 'bo' })), ['before the lost session', 'while the session was lost']);
  });
});

/**
 * A fake Discord with Cara on it (`cara`: her id), and the connector alone, no core: `start` hands it what the
 * database would say, and what it hands over is in `got`.
 */
async function alone(log = pino({ level: 'silent' }), options: Omit<FakeDiscordOptions, 'users'> = {}) {
  const fake = await startFakeDiscord({ users: [{ username: 'cara', global_name: 'Cara' }], ...options });
  const connector = createDiscordConnector({ token: fake.token, apiUrl: fake.apiRoot, log });
  const got: InboundEvent[] = [];
  return {
    fake,
    connector,
    got,
    cara: fake.user('cara').id,
    start: (history: InboundHistory) => connector.start(async (event) => (got.push(event), { status: 'queued' }), undefined, history),
    async stop() {
      await connector.stop();
      await fake.close();
    },
  };
}

describe('Discord: reading back, the connector alone', () => {
  it('lets what the new session brings through after a while, and reads nothing back, when the database does not answer', async () => {
    const lines: string[] = [];
    const t = await alone(pino({ level: 'warn' }, { write: (line: string) => void lines.push(line) }));
    const startedAt = Date.now();
    try {
      await t.start({ lastStoredAt: () => new Promise(() => {}), recentChats: async () => [], configured: () => ({ chats: [], people: [] }) });
      t.fake.sendDm({ from: 'cara', content: 'anyone?' });
      await until(() => t.got.length === 1, 'the DM handed over', 15_000);
      expect(Date.now() - startedAt).toBeGreaterThanOrEqual(4500);
      expect(t.got[0].text).toBe('anyone?');
      expect(lines.join('\n')).toContain('could not be listed in time');
    } finally {
      await t.stop();
    }
  });

  it('reads nothing back for a bot that never stored an event', async () => {
    const t = await alone();
    const listed: Date[] = [];
    try {
      await t.start({
        lastStoredAt: async () => undefined,
        recentChats: async (since) => (listed.push(since), []),
        configured: () => ({ chats: [], people: [t.cara] }),
      });
      t.fake.sendDm({ from: 'cara', content: 'first ever' });
      await until(() => t.got.length === 1, 'the DM handed over');
      await new Promise((r) => setTimeout(r, 300));
      expect(listed).toEqual([]);
      expect(t.fake.callsOf('GET /channels/:id/messages')).toEqual([]);
      expect(t.fake.callsOf('POST /users/@me/channels')).toEqual([]);
    } finally {
      await t.stop();
    }
  });

  it('reads the newest 500 of a chat back, oldest first, and never the bot’s own messages', async () => {
    const t = await alone();
    const dm = t.fake.dmChannel('cara');
    try {
      for (let n = 0; n < 505; n++) {
        t.fake.sendDm({ from: 'cara', content: `while away ${n}` });
        // The bot's own message among them (a reply sent before its process went down).
        if (n === 502) {
          const posted = await fetch(`${t.fake.apiRoot}/v10/channels/${dm}/messages`, {
            method: 'POST',
            headers: { authorization: `Bot ${t.fake.token}`, 'content-type': 'application/json' },
            body: JSON.stringify({ content: 'from the bot' }),
          });
          expect(posted.status).toBe(200);
        }
      }
      await t.start({ lastStoredAt: async () => new Date(Date.now() - 3600_000), recentChats: async () => [], configured: () => ({ chats: [], people: [t.cara] }) });
      await until(() => t.got.length >= 499, () => `the chat read back (${t.got.length})`);
      await new Promise((r) => setTimeout(r, 300));
      // 500 messages read, the bot's one among them left out: the 499 newest of Cara's, in the order she wrote them.
      expect(t.got.map((e) => e.text)).toEqual(Array.from({ length: 499 }, (_, i) => `while away ${i + 6}`));
    } finally {
      await t.stop();
    }
  });

  it('lists the chats again while the database does not answer (a restart), and reads them back in order', async () => {
    const t = await alone();
    let asked = 0;
    try {
      t.fake.sendDm({ from: 'cara', content: 'while away' });
      const live = atNextReady(t.fake, () => t.fake.sendDm({ from: 'cara', content: 'right after' }));
      await t.start({
        lastStoredAt: async () => {
          // The database restarting: refused twice, then there.
          if (++asked <= 2) throw new Error('connect ECONNREFUSED 127.0.0.1:5432');
          return new Date(Date.now() - 3600_000);
        },
        recentChats: async () => [],
        configured: () => ({ chats: [], people: [t.cara] }),
      });
      // The one right after the READY is read back too (it was there when the chat was read), then comes live: the
      // core drops the second by its id.
      await until(() => t.got.length === 3, () => `the DMs handed over (${t.got.map((e) => e.text).join(', ')})`);
      live.restore();
      expect(live.fired()).toBe(true);
      expect(asked).toBe(3);
      expect(t.got.map((e) => e.text)).toEqual(['while away', 'right after', 'right after']);
    } finally {
      await t.stop();
    }
  });
  it('queues no thread to read back once it is stopping, when the guilds come only after', async () => {
    const t = await alone(pino({ level: 'silent' }), {
      guilds: [{ name: 'Guild', channels: [{ name: 'team' }], threads: [{ name: 'side', parent: 'team' }] }],
      guildsAfterMs: 1500,
    });
    const team = t.fake.channel('team').id;
    const side = t.fake.channel('side').id;
    const readsOf = (channel: string) => t.fake.callsOf('GET /channels/:id/messages').filter((c) => c.path === `/channels/${channel}/messages`);
    try {
      t.fake.sendGuildMessage({ channel: 'team', thread: 'side', from: 'cara', content: 'in the thread while away' });
      const ready = atNextReady(t.fake, () => {});
      const started = t.start({ lastStoredAt: async () => new Date(Date.now() - 3600_000), recentChats: async () => [{ chat: team }], configured: () => ({ chats: [], people: [] }) });
      await until(() => ready.fired(), 'the READY');
      ready.restore();
      // Stopping while the session's guilds are still to come: what the pause held goes at once (drain), and a thread
      // read back behind it would be out of order.
      await new Promise((r) => setTimeout(r, 200));
      await t.connector.stop();
      await started.catch(() => {});
      await new Promise((r) => setTimeout(r, 2000));
      // The chat listed was read back (its read was queued before the stop); the thread under it, not.
      expect(readsOf(team).length).toBeGreaterThan(0);
      expect(readsOf(side)).toEqual([]);
    } finally {
      await t.fake.close();
    }
  });
  it('pages through a channel’s archived threads back to the gap’s start, and reads back the one posted in', async () => {
    // 60 threads under #team where nobody wrote meanwhile.
    const others = Array.from({ length: 60 }, (_, n) => ({ name: `other-${n}`, parent: 'team' }));
    const t = await alone(pino({ level: 'silent' }), { guilds: [{ name: 'Guild', channels: [{ name: 'team' }], threads: others }] });
    const team = t.fake.channel('team').id;
    try {
      // Posted in while away, then archived; the 60 others archived after it: it is on the second page of 50.
      t.fake.sendGuildMessage({ channel: 'team', thread: 'posted-in', from: 'cara', content: 'in a thread archived since' });
      t.fake.archiveThread('posted-in');
      for (const other of others) {
        await new Promise((r) => setTimeout(r, 2));
        t.fake.archiveThread(other.name);
      }
      await t.start({ lastStoredAt: async () => new Date(Date.now() - 2 * 3600_000), recentChats: async () => [{ chat: team }], configured: () => ({ chats: [], people: [] }) });
      await until(() => t.got.some((e) => e.text === 'in a thread archived since'), 'the thread archived first read back');
      expect(t.fake.callsOf('GET /channels/:id/threads/archived/public')).toHaveLength(2);
    } finally {
      await t.stop();
    }
  });
  it('holds what the new session brings no longer than 10 s in all for archived threads, however many channels answer slowly', async () => {
    const names = Array.from({ length: 15 }, (_, n) => `channel-${n}`);
    const t = await alone(pino({ level: 'silent' }), { guilds: [{ name: 'Guild', channels: names.map((name) => ({ name })) }] });
    try {
      // Every channel's archived threads come 4.5 s late: three rounds of five would take 13.5 s.
      t.fake.failNext('GET /channels/:id/threads/archived/public', { slowMs: 4500 }, names.length);
      let readyAt = 0;
      const live = atNextReady(t.fake, () => {
        readyAt = Date.now();
        t.fake.sendDm({ from: 'cara', content: 'live, right after' });
      });
      await t.start({
        lastStoredAt: async () => new Date(Date.now() - 2 * 3600_000),
        recentChats: async () => names.map((name) => ({ chat: t.fake.channel(name).id })),
        configured: () => ({ chats: [], people: [] }),
      });
      await until(() => t.got.some((e) => e.text === 'live, right after'), 'the live DM handed over', 20_000);
      live.restore();
      const held = Date.now() - readyAt;
      expect(held).toBeGreaterThan(8000);
      expect(held).toBeLessThan(12_000);
    } finally {
      await t.stop();
    }
  });
});
