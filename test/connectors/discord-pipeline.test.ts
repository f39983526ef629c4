// Discord messages through the whole pipeline: who is answered where (mentions, threads under a listed channel,
// strangers, other bots, the bot itself), edits as (edited) turns, attachments fetched after the message is stored,
// and streamed answers as paced edits of one message.
import fs from 'node:fs/promises';
import path from 'node:path';
import { sql } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { until } from '../support/until.ts';
import { PERSONA, useDiscordHarness, storedEvents } from './discord-harness.ts';

const h = useDiscordHarness();

const texts = (channel: string) => h.fake.messages(channel).map((m) => m.content);
const quiet = () => new Promise((r) => setTimeout(r, 500));
const label = (person: string) => `[${person === 'ana' ? 'Ana' : 'Bo'} (discord:${h.fake.user(person).id})]`;

describe('Discord routing', () => {
  it('in a mention channel, answers a real mention, a reply to the bot and a command after a mention, and nothing else', async () => {
    const bot = `<@${h.fake.bot.id}>`;
    h.fake.sendGuildMessage({ channel: 'team', from: 'bo', content: 'just talking' });
    h.fake.sendGuildMessage({ channel: 'team', from: 'bo', content: `@everyone <@&${h.fake.guild().botRoleId}> <@&${h.fake.guild().roles[1].id}> hello all` });
    h.fake.sendGuildMessage({ channel: 'team', from: 'bo', content: `<@${h.fake.user('ana').id}> what do you think?` });
    h.fake.sendGuildMessage({ channel: 'team', from: 'otherbot', content: `${bot} I am a bot` });
    h.fake.sendGuildMessage({ channel: 'elsewhere', from: 'ana', content: `${bot} nobody's channel` });
    await quiet();
    expect(texts('team')).toEqual([]);
    expect(texts('elsewhere')).toEqual([]);
    expect(h.llm.requests).toHaveLength(0);

    h.fake.sendGuildMessage({ channel: 'team', from: 'bo', content: `${bot} are you there?` });
    const first = await until(() => h.fake.messages('team').find((m) => m.content.endsWith('are you there?')), 'the answer to the mention');
    expect(first.content).toBe(`echo: ${label('bo')} are you there?`);
    await h.app.waitForIdle(h.conversation({ channel: 'team' }));
    h.fake.sendGuildMessage({ channel: 'team', from: 'ana', content: 'and a follow-up', message_reference: first.id, pingRepliedUser: false });
    await until(() => texts('team').includes(`echo: ${label('ana')} and a follow-up`), 'the answer to the reply');
    await h.app.waitForIdle(h.conversation({ channel: 'team' }));
    h.fake.sendGuildMessage({ channel: 'team', from: 'bo', content: `${bot} /status` });
    await until(() => texts('team').find((t) => t.startsWith('Persona: ')), 'the status');
    expect(h.llm.requests).toHaveLength(2);
    // The bot's own messages never reached the core.
    const own = new Set(h.fake.messages('team').map((m) => m.id));
    expect((await storedEvents(h)).filter((id) => own.has(id))).toEqual([]);
    await h.app.waitForIdle(h.conversation({ channel: 'team' }));
  });

  it('a thread is a conversation of its own, answered in the thread, under its channel\'s settings', async () => {
    const bot = `<@${h.fake.bot.id}>`;
    h.fake.sendGuildMessage({ channel: 'team', thread: 'topic', from: 'ana', content: 'no mention in the thread' });
    await quiet();
    const topic = h.fake.channel('topic').id;
    expect(texts(topic)).toEqual([]);
    h.fake.sendGuildMessage({ channel: 'team', thread: 'topic', from: 'ana', content: `${bot} in the thread` });
    await until(() => texts(topic).includes(`echo: ${label('ana')} in the thread`), 'the answer in the thread');
    h.fake.sendGuildMessage({ channel: 'open', thread: 'chatter', from: 'bo', content: 'no mention needed here' });
    const chatter = await until(() => h.fake.channel('chatter'), 'the thread');
    await until(() => texts(chatter.id).includes(`echo: ${label('bo')} no mention needed here`), 'the answer in #open\'s thread');
    expect(h.fake.messages('team').filter((m) => m.content.includes('in the thread'))).toEqual([]);
    const conversations = (await h.query<{ id: string }>(sql`select id from conversations where thread is not null order by id`)).map((r) => r.id);
    expect(conversations).toEqual(expect.arrayContaining([h.conversation({ channel: 'team', thread: 'topic' }), h.conversation({ channel: 'open', thread: 'chatter' })]));
    expect(h.conversation({ channel: 'team', thread: 'topic' })).toBe(`${PERSONA}:discord:${h.fake.channel('team').id}:${topic}`);
    await h.app.waitForIdle(h.conversation({ channel: 'team', thread: 'topic' }));
    await h.app.waitForIdle(h.conversation({ channel: 'open', thread: 'chatter' }));
  });

  it('tells a stranger their id once, and never calls the model for them', async () => {
    h.fake.sendDm({ from: 'eve', content: 'let me in' });
    const dm = h.fake.dmChannel('eve');
    await until(() => texts(dm).length === 1, 'the notice');
    expect(texts(dm)[0]).toContain(`discord:${h.fake.user('eve').id}`);
    h.fake.sendDm({ from: 'eve', content: 'hello?' });
    await quiet();
    expect(texts(dm)).toHaveLength(1);
    expect(h.llm.requests).toHaveLength(0);
  });
});

describe('Discord messages', () => {
  it('an edited message becomes a turn marked (edited), once per edit', async () => {
    const dm = h.fake.dmChannel('ana');
    const message = h.fake.sendDm({ from: 'ana', content: 'meet at 5' });
    await until(() => texts(dm).includes('echo: meet at 5'), 'the answer');
    await h.app.waitForIdle(h.conversation({ dm: 'ana' }));
    h.fake.editAsPerson(message, 'meet at 6');
    await until(() => texts(dm).includes('echo: (edited) meet at 6'), 'the answer to the edit');
    await h.app.waitForIdle(h.conversation({ dm: 'ana' }));
    // The bot's own edits (a question's outcome, a draft) are not people's edits.
    const mine = h.fake.messages(dm).at(-1)!;
    await h.connector.edit!(dm, mine.id, 'edited by the bot');
    await quiet();
    expect(h.llm.requests.map((r) => r.lastUserText)).toEqual(['meet at 5', '(edited) meet at 6']);
  });

  it('downloads an attachment once the message is stored, into the workspace, once however often the message comes', async () => {
    const dm = h.fake.dmChannel('bo');
    const from = h.fake.calls.length;
    const message = h.fake.sendDm({ from: 'bo', content: 'what is this?', attachments: [{ name: 'photo.png', bytes: Buffer.from('png bytes'), contentType: 'image/png' }] });
    await until(() => texts(dm).find((t) => t.startsWith('echo: what is this?')), 'the answer');
    const file = `photo-${message.attachments[0].id.slice(-8)}.png`;
    expect(h.llm.requests[0].lastUserText).toBe(`what is this?\n[attachment: photo (photo.png, image/png, 9 bytes, saved at uploads/${file})]`);
    expect(await fs.readFile(path.join(h.personasDir, PERSONA, 'workspace', 'uploads', file), 'utf8')).toBe('png bytes');
    // The file was fetched (from a fresh URL: the message read again) after the core had stored the message.
    const [stored] = await h.query<{ received_at: Date }>(sql`select received_at from inbound_events where connector = 'discord' and external_id = ${message.id}`);
    const reads = h.fake.calls.slice(from).filter((c) => c.method === 'GET' && c.path === `/channels/${dm}/messages/${message.id}`);
    expect(reads).toHaveLength(1);
    expect(reads[0].at).toBeGreaterThanOrEqual(new Date(stored.received_at).getTime());
    await h.app.waitForIdle(h.conversation({ dm: 'bo' }));

    await h.restartConnector();
    h.fake.dispatch('MESSAGE_CREATE', h.fake.frames.find((f) => f.direction === 'out' && f.t === 'MESSAGE_CREATE' && f.d.id === message.id)!.d);
    await quiet();
    expect(h.fake.calls.slice(from).filter((c) => c.method === 'GET' && c.path === `/channels/${dm}/messages/${message.id}`)).toHaveLength(1);
    expect(h.llm.requests).toHaveLength(1);
  });

  it('records a file over the size cap without downloading it', async () => {
    const dm = h.fake.dmChannel('ana');
    const from = h.fake.calls.length;
    h.fake.sendDm({ from: 'ana', content: 'a big one', attachments: [{ name: 'big.bin', bytes: Buffer.alloc(21 * 1024 * 1024), contentType: 'application/octet-stream' }] });
    await until(() => texts(dm).find((t) => t.startsWith('echo: a big one')), 'the answer');
    expect(h.llm.requests[0].lastUserText).toMatch(/^a big one\n\[attachment: document \(big\.bin, .*not downloaded: larger than the 20 MB download limit/);
    expect(h.fake.calls.slice(from).filter((c) => c.method === 'GET' && c.path.startsWith(`/channels/${dm}/messages/`))).toHaveLength(0);
    await h.app.waitForIdle(h.conversation({ dm: 'ana' }));
  });

  it('streams an answer into one message by edits at most every 1.5 s, ending on the final text', async () => {
    const persona = h.app.personas.find((p) => p.name === PERSONA)!;
    persona.tools.stream = true;
    try {
      const answer = Array.from({ length: 40 }, (_, i) => `word${i}`).join(' ');
      h.llm.script({ text: answer, chunks: 40, chunkDelayMs: 80 });
      const dm = h.fake.dmChannel('bo');
      const before = h.fake.messages(dm).length;
      const asked = Date.now();
      h.fake.sendDm({ from: 'bo', content: 'tell me slowly' });
      const draft = await until(() => h.fake.messages(dm)[before], 'the draft');
      expect(Date.now() - asked).toBeLessThan(2000);
      await until(() => h.fake.message(draft.id)!.content === answer, 'the final text');
      await h.app.waitForIdle(h.conversation({ dm: 'bo' }));
      await quiet();
      expect(h.fake.messages(dm).slice(before).map((m) => m.content)).toEqual([answer]);
      const edits = h.fake.callsOf(`PATCH /channels/${dm}/messages/${draft.id}`).map((c) => c.at);
      expect(edits.length).toBeGreaterThanOrEqual(1);
      // Frames are paced; only the final text may follow the last frame sooner.
      const frames = [Date.parse(draft.timestamp), ...edits.slice(0, -1)];
      for (let i = 1; i < frames.length; i++) expect(frames[i] - frames[i - 1]).toBeGreaterThanOrEqual(1400);
      expect(h.llm.requests[0].stream).toBe(true);
    } finally {
      persona.tools.stream = false;
    }
  });
});
