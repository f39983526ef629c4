// Slack events in Socket Mode, past what the conformance suite covers: redeliveries, the two events of one mention,
// the bot's own posts, edits and late files, threads, reactions, and the Web API client's short retries.
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { chatConversationId } from '../../src/conversation-id.ts';
import { PERSONA, setStreaming, settle } from '../conformance/app.ts';
import { until } from '../support/until.ts';
import { HELPER, OWNER, OWNER_DM, sleep, startSlackHarness, TEAM, type SlackHarness } from './slack-harness.ts';

let h: SlackHarness;
const conversations = new Set<string>();
const conversation = (chat: string, thread?: string) => {
  const id = chatConversationId(PERSONA, 'slack', chat, thread);
  conversations.add(id);
  return id;
};
const lastUser = (i: number) => h.model.requests[i].lastUserText;
/** What a message shows: its sections when it has blocks, else its text. */
const shown = (m: { text?: string; blocks?: any[] }) => (m.blocks?.length ? m.blocks.map((b) => b.text?.text ?? '').join('\n') : (m.text ?? ''));
/** The person's messages a model call carried. */
const userTexts = (i: number) => (h.model.requests[i].body.messages as { role: string; content: unknown }[]).filter((m) => m.role === 'user').map((m) => m.content);

beforeAll(async () => {
  h = await startSlackHarness({ mode: 'socket' });
});
afterAll(() => h?.stop());
beforeEach(async () => {
  await settle(h.app, conversations);
  h.model.reset();
  h.fake.reset();
});

describe('redeliveries', () => {
  it('an event Slack sends again (retry_attempt 1, then 2) is acknowledged each time and answered once', async () => {
    const first = await h.fake.dm({ user: OWNER, text: 'only once' });
    await until(() => h.texts(OWNER_DM).length === 1, 'the reply');
    const again = await h.fake.redeliver(first, { retryReason: 'timeout' });
    const third = await h.fake.redeliver(again, { retryReason: 'timeout' });
    expect([again.acked, third.acked]).toEqual([true, true]);
    expect(third.envelope.retry_attempt).toBe(2);
    expect(third.envelope.payload.event_id).toBe(first.envelope.payload.event_id);
    await sleep(400);
    await h.app.waitForIdle(conversation(OWNER_DM));
    expect(h.texts(OWNER_DM)).toEqual(['echo: only once']);
    expect(h.model.requests).toHaveLength(1);
  });

  it('a redelivery racing the first delivery is answered once', async () => {
    const event = { type: 'message', channel: OWNER_DM, channel_type: 'im', user: OWNER, text: 'racing', ts: '1700000100.000100', event_ts: '1700000100.000100' };
    const [a, b] = await Promise.all([h.fake.sendEvent(event, { eventId: 'EvRACE1' }), h.fake.sendEvent(event, { eventId: 'EvRACE1', retryAttempt: 1, retryReason: 'timeout' })]);
    expect([a.acked, b.acked]).toEqual([true, true]);
    await until(() => h.texts(OWNER_DM).length === 1, 'the reply');
    await sleep(400);
    await h.app.waitForIdle(conversation(OWNER_DM));
    expect(h.texts(OWNER_DM)).toEqual(['echo: racing']);
  });

  it('the same post under another event id (deduplicated by channel and ts) is answered once', async () => {
    const event = { type: 'message', channel: OWNER_DM, channel_type: 'im', user: OWNER, text: 'same post', ts: '1700000200.000100', event_ts: '1700000200.000100' };
    await h.fake.sendEvent(event, { eventId: 'EvFIRST' });
    await until(() => h.texts(OWNER_DM).length === 1, 'the reply');
    await h.fake.sendEvent(event, { eventId: 'EvSECOND' });
    await sleep(400);
    await h.app.waitForIdle(conversation(OWNER_DM));
    expect(h.texts(OWNER_DM)).toEqual(['echo: same post']);
    expect(h.model.requests).toHaveLength(1);
  });
});

describe('one mention, two events', () => {
  for (const messageFirst of [false, true]) {
    const text = `hi from the DM, ${messageFirst ? 'message' : 'app_mention'} first`;
    it(`an app_mention that also arrives as a DM message is answered once (${messageFirst ? 'message' : 'app_mention'} first)`, async () => {
      const { mention, message } = await h.fake.mention({ user: OWNER, channel: OWNER_DM, text, messageFirst });
      expect([mention.acked, message.acked]).toEqual([true, true]);
      expect(message.envelope.payload.event.channel_type).toBe('im');
      await until(() => h.texts(OWNER_DM).length === 1, 'the reply');
      await sleep(400);
      await h.app.waitForIdle(conversation(OWNER_DM));
      expect(h.texts(OWNER_DM)).toEqual([`echo: ${text}`]);
      expect(h.model.requests).toHaveLength(1);
      // The mention that addressed the bot is not part of what the model reads; the post is in the transcript once.
      expect(lastUser(0)).toBe(text);
      expect(userTexts(0).filter((t) => t === text)).toHaveLength(1);
    });
  }

  it('a mention in a channel (app_mention and message) is answered once, in a thread on the mentioned message', async () => {
    const { mention } = await h.fake.mention({ user: OWNER, channel: TEAM, text: 'look at this', messageFirst: true });
    const ts = mention.envelope.payload.event.ts;
    await until(() => h.fake.messages(TEAM).length === 1, 'the reply');
    await sleep(400);
    await h.app.waitForIdle(conversation(TEAM, ts));
    const [reply] = h.fake.messages(TEAM);
    expect(reply).toMatchObject({ thread_ts: ts });
    expect(reply.text).toMatch(/look at this$/);
    expect(h.fake.messages(TEAM)).toHaveLength(1);
    expect(h.model.requests).toHaveLength(1);
    expect(userTexts(0).filter((t) => String(t).includes('look at this'))).toEqual(['[Ana (slack:U0OWNER)] look at this']);
  });
});

describe('threads', () => {
  it('follow-ups in the thread the persona answered in continue its conversation without a mention; other threads need one', async () => {
    const { mention } = await h.fake.mention({ user: OWNER, channel: TEAM, text: 'start here' });
    const ts = mention.envelope.payload.event.ts;
    await until(() => h.fake.messages(TEAM).length === 1, 'the first reply');
    await h.app.waitForIdle(conversation(TEAM, ts));
    await h.fake.channelMessage({ user: HELPER, channel: TEAM, text: 'and one more thing', thread_ts: ts });
    await until(() => h.fake.messages(TEAM).length === 2, 'the second reply');
    await h.app.waitForIdle(conversation(TEAM, ts));
    const second = h.fake.messages(TEAM)[1];
    expect(second.thread_ts).toBe(ts);
    // One conversation: the follow-up's model call has the mention before it.
    expect(JSON.stringify(h.model.requests[1].body.messages)).toContain('start here');
    expect(lastUser(1)).toContain('and one more thing');

    const elsewhere = await h.fake.channelMessage({ user: OWNER, channel: TEAM, text: 'a thread of its own' });
    await h.fake.channelMessage({ user: OWNER, channel: TEAM, text: 'talking here', thread_ts: elsewhere.envelope.payload.event.ts });
    await sleep(500);
    expect(h.fake.messages(TEAM)).toHaveLength(2);
    expect(h.model.requests).toHaveLength(2);
  });

  it('a question asked in the thread is answered by a typed reply there, without a mention', async () => {
    h.model.script({ toolCalls: [{ name: 'ask_user', arguments: { question: 'Which environment?' } }] }, (req) => ({ text: `got: ${req.lastUserText}` }));
    const { mention } = await h.fake.mention({ user: OWNER, channel: TEAM, text: 'deploy it' });
    const ts = mention.envelope.payload.event.ts;
    const question = await until(() => h.fake.messages(TEAM).find((m) => shown(m).includes('Which environment?')), 'the question');
    expect(question.thread_ts).toBe(ts);
    await h.fake.channelMessage({ user: OWNER, channel: TEAM, text: 'staging', thread_ts: ts });
    const reply = await until(() => h.fake.messages(TEAM).find((m) => (m.text ?? '').startsWith('got: ')), 'the answer');
    expect(reply.thread_ts).toBe(ts);
    expect(reply.text).toMatch(/^got: \[answer to Q#[\w-]+ "Which environment\?" \(via .+\)\]\nstaging$/);
    await h.app.waitForIdle(conversation(TEAM, ts));
    expect(h.model.requests).toHaveLength(2);
  });

  it('the model reads who spoke in a channel by name, looked up the first time someone speaks', async () => {
    const { mention } = await h.fake.mention({ user: 'U0CAROL', channel: TEAM, text: 'first time here' });
    await until(() => h.fake.messages(TEAM).length === 1, 'the reply');
    await h.app.waitForIdle(conversation(TEAM, mention.envelope.payload.event.ts));
    expect(lastUser(0)).toBe('[Carol (slack:U0CAROL)] first time here');
    expect(h.fake.callsOf('users.info').map((c) => c.body.user)).toEqual(['U0CAROL']);
  });

  it('a mention inside a thread is answered in that thread (its root ts, never the mention’s own)', async () => {
    const root = await h.fake.channelMessage({ user: HELPER, channel: TEAM, text: 'deploy is failing' });
    const rootTs = root.envelope.payload.event.ts;
    const { mention } = await h.fake.mention({ user: OWNER, channel: TEAM, text: 'can you look?', thread_ts: rootTs });
    await until(() => h.fake.messages(TEAM).length === 1, 'the reply');
    await h.app.waitForIdle(conversation(TEAM, rootTs));
    expect(h.fake.messages(TEAM)[0].thread_ts).toBe(rootTs);
    expect(mention.envelope.payload.event.ts).not.toBe(rootTs);
  });
});

describe('what is not a person writing to the bot', () => {
  it('the bot’s own posts and edits (echoed back by Slack) and other bots’ messages are ignored: nothing stored, no reply', async () => {
    await h.fake.dm({ user: OWNER, text: 'hello' });
    await until(() => h.texts(OWNER_DM).length === 1, 'the reply');
    await h.app.waitForIdle(conversation(OWNER_DM));
    // Slack told the bot of its own post, acknowledged like any event.
    const echo = await until(() => h.fake.deliveries.find((d) => d.envelope.payload.event?.bot_id === h.fake.botId && d.acked), 'the echo of the reply');
    expect(echo.envelope.payload.event.user).toBe(h.fake.botUserId);
    const stored = await h.count('inbound_events');

    const own = { type: 'message', channel: OWNER_DM, channel_type: 'im', user: h.fake.botUserId, bot_id: h.fake.botId, text: 'echo: hello', ts: '1700000300.000100' };
    const changed = {
      type: 'message',
      subtype: 'message_changed',
      channel: OWNER_DM,
      channel_type: 'im',
      hidden: true,
      ts: '1700000300.000300',
      message: { ...own, text: 'echo: hello (edited)', edited: { user: h.fake.botUserId, ts: '1700000300.000300' } },
      previous_message: own,
    };
    const otherBot = { type: 'message', subtype: 'bot_message', channel: OWNER_DM, channel_type: 'im', bot_id: 'B0OTHER', username: 'deploybot', text: 'build passed', ts: '1700000300.000400' };
    for (const event of [own, changed, otherBot]) expect((await h.fake.sendEvent(event)).acked).toBe(true);
    await sleep(500);
    expect(await h.count('inbound_events')).toBe(stored);
    expect(h.texts(OWNER_DM)).toEqual(['echo: hello']);
    expect(h.model.requests).toHaveLength(1);
  });
});

describe('edits and files', () => {
  it('a person’s edit is an (edited) turn; a change that leaves the text as it was (a link preview) is nothing', async () => {
    const original = { type: 'message', user: OWNER, text: 'meet at 5', ts: '1700000400.000100' };
    const edit = (text: string, editTs: string) => ({
      type: 'message',
      subtype: 'message_changed',
      channel: OWNER_DM,
      channel_type: 'im',
      hidden: true,
      ts: editTs,
      message: { ...original, text, edited: { user: OWNER, ts: editTs } },
      previous_message: original,
    });
    await h.fake.sendEvent(edit('meet at 6', '1700000400.000200'));
    await until(() => h.texts(OWNER_DM).length === 1, 'the reply to the edit');
    await h.app.waitForIdle(conversation(OWNER_DM));
    expect(lastUser(0)).toBe('(edited) meet at 6');
    await h.fake.sendEvent({ ...edit('meet at 5', '1700000400.000300'), message: { ...original, attachments: [{ title: 'preview' }] } });
    await sleep(400);
    expect(h.model.requests).toHaveLength(1);
  });

  it('a shared file is recorded with the message and downloaded after the commit; a file added later is a new message', async () => {
    await h.fake.dm({ user: OWNER, text: 'here is the log', files: [{ name: 'build.log', bytes: Buffer.from('line one\nline two\n'), mimetype: 'text/plain' }] });
    await until(() => h.texts(OWNER_DM).length === 1, 'the reply');
    await h.app.waitForIdle(conversation(OWNER_DM));
    expect(lastUser(0)).toContain('here is the log');
    expect(lastUser(0)).toContain('build.log');
    const workspace = path.join(h.app.personas[0].dir, 'workspace', 'uploads');
    const saved = await until(async () => (await fs.readdir(workspace).catch(() => [] as string[])).find((f) => f.startsWith('build')), 'the downloaded file');
    expect(await fs.readFile(path.join(workspace, saved), 'utf8')).toBe('line one\nline two\n');

    const message = { type: 'message', user: OWNER, text: 'and a picture', ts: '1700000500.000100' };
    const later = {
      type: 'message',
      subtype: 'message_changed',
      channel: OWNER_DM,
      channel_type: 'im',
      hidden: true,
      ts: '1700000500.000200',
      // Over the download limit, so the message is read at once (no download is started for it).
      message: { ...message, files: [{ id: 'F0LATE', name: 'shot.png', mimetype: 'image/png', size: 30 * 1024 * 1024 }] },
      previous_message: message,
    };
    await h.fake.sendEvent(later);
    await until(() => h.texts(OWNER_DM).length === 2, 'the reply to the late file');
    await h.app.waitForIdle(conversation(OWNER_DM));
    expect(lastUser(1)).toContain('and a picture');
    expect(lastUser(1)).not.toContain('(edited)');
    expect(lastUser(1)).toContain('shot.png');
  });
});

describe('streamed replies', () => {
  it('grow in one message in the mention’s thread by chat.update, paced for a channel, and go on in new messages past 4,000 characters', async () => {
    setStreaming(h.app, true);
    try {
      const words = Array.from({ length: 900 }, (_, i) => `word${i}`).join(' ');
      h.model.script({ text: words, chunks: 30, chunkDelayMs: 100 });
      const { mention } = await h.fake.mention({ user: OWNER, channel: TEAM, text: 'tell me a long story' });
      const ts = mention.envelope.payload.event.ts;
      const first = await until(() => h.fake.messages(TEAM)[0], 'the draft');
      expect(first.thread_ts).toBe(ts);
      await h.app.waitForIdle(conversation(TEAM, ts));
      await sleep(300);
      const messages = h.fake.messages(TEAM);
      expect(messages.length).toBeGreaterThanOrEqual(2);
      for (const m of messages) {
        expect(m.thread_ts).toBe(ts);
        expect((m.text ?? '').length).toBeLessThanOrEqual(4000);
      }
      expect(messages.map((m) => m.text).join(' ').replace(/\s+/g, ' ')).toBe(words);
      // Edited in place, no faster than one update every 3 s in a channel (the stream lasts about 3 s).
      const updates = h.fake.callsOf('chat.update').filter((c) => c.body.ts === first.ts);
      expect(updates.length).toBeGreaterThanOrEqual(1);
      for (let i = 1; i < updates.length - 1; i++) expect(updates[i].at - updates[i - 1].at).toBeGreaterThanOrEqual(2900);
      expect(h.model.requests).toHaveLength(1);
    } finally {
      setStreaming(h.app, false);
    }
  }, 20_000);
});

describe('sending files', () => {
  it('goes through files.uploadV2 into the chat and thread, the text as its comment, the share’s ts as the message id', async () => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'slack-upload-'));
    const file = path.join(dir, 'report.txt');
    await fs.writeFile(file, 'the figures');
    const sent = await h.connector.send({ chat: TEAM, thread: '1700000700.000100', text: 'Here is **the report**.', files: [file] });
    const [uploaded] = h.fake.files;
    expect(uploaded.bytes?.toString()).toBe('the figures');
    const share = h.fake.messages(TEAM).find((m) => m.files);
    expect(share).toMatchObject({ text: 'Here is *the report*.', thread_ts: '1700000700.000100', files: [{ name: 'report.txt' }] });
    expect(sent).toEqual({ ids: [share!.ts], thread: '1700000700.000100' });
    expect(h.fake.callsOf('chat.postMessage')).toHaveLength(0);
    await fs.rm(dir, { recursive: true, force: true });
  });
});

describe('reactions', () => {
  it('the persona reacts with Unicode, Slack gets the name; a person’s reaction to the bot’s message comes back as Unicode', async () => {
    h.model.script({ toolCalls: [{ name: 'react', arguments: { emoji: '👍' } }] }, { text: 'done' });
    const dm = await h.fake.dm({ user: OWNER, text: 'thanks' });
    const ts = dm.envelope.payload.event.ts;
    await until(() => h.texts(OWNER_DM).length === 1, 'the reply');
    await h.app.waitForIdle(conversation(OWNER_DM));
    expect(h.fake.message(OWNER_DM, ts)?.reactions).toEqual(['+1']);
    const reply = h.fake.messages(OWNER_DM)[0];
    await h.fake.sendEvent({ type: 'reaction_added', user: OWNER, reaction: 'tada', item: { type: 'message', channel: OWNER_DM, ts: reply.ts }, item_user: h.fake.botUserId, event_ts: '1700000600.000100' });
    // A custom emoji has no Unicode: nothing is recorded.
    await h.fake.sendEvent({ type: 'reaction_added', user: OWNER, reaction: 'partyparrot', item: { type: 'message', channel: OWNER_DM, ts: reply.ts }, item_user: h.fake.botUserId, event_ts: '1700000600.000200' });
    await sleep(300);
    await h.fake.dm({ user: OWNER, text: 'what did I think?' });
    await until(() => h.texts(OWNER_DM).length === 2, 'the second reply');
    await h.app.waitForIdle(conversation(OWNER_DM));
    const transcript = JSON.stringify(h.model.requests.at(-1)!.body.messages);
    expect(transcript).toContain('reacted 🎉 to your message');
    expect(transcript).not.toContain('partyparrot');
  });
});

describe('the Web API client', () => {
  it('leaves a failed chat.postMessage to the outbox, which looks in the chat before each retry: posted once', async () => {
    h.fake.failNext('chat.postMessage', { status: 503, times: 3 });
    const historyBefore = h.fake.callsOf('conversations.history').length;
    const started = Date.now();
    await h.fake.dm({ user: OWNER, text: 'through the storm' });
    await until(() => h.texts(OWNER_DM).length === 1, 'the reply', 20_000);
    await h.app.waitForIdle(conversation(OWNER_DM));
    const calls = h.fake.callsOf('chat.postMessage');
    // The client does not retry a post itself (its default would go on for half an hour, and a post whose answer
    // was lost may be in the chat): each retry is the outbox's, after a look at the chat for the message's key.
    expect(calls.map((c) => c.status)).toEqual([503, 503, 503, 200]);
    expect(h.fake.callsOf('conversations.history').length - historyBefore).toBe(3);
    expect(Date.now() - started).toBeLessThan(15_000);
    expect(h.texts(OWNER_DM)).toEqual(['echo: through the storm']);
  }, 30_000);

  it('waits out a 429’s Retry-After and posts once', async () => {
    h.fake.failNext('chat.postMessage', { retryAfter: 1 });
    await h.fake.dm({ user: OWNER, text: 'slow down' });
    await until(() => h.texts(OWNER_DM).length === 1, 'the reply');
    const calls = h.fake.callsOf('chat.postMessage');
    expect(calls.map((c) => c.status)).toEqual([429, 200]);
    expect(calls[1].at - calls[0].at).toBeGreaterThanOrEqual(1000);
    expect(h.texts(OWNER_DM)).toEqual(['echo: slow down']);
  });

  it('a message to a person (a persona’s primary, "to": "U…") goes to the bot’s DM with them', async () => {
    await h.app.delivery.deliver({ dedupeKey: 'primary-test', connector: 'slack', chat: OWNER, text: 'a note for you' });
    await until(() => h.texts(OWNER_DM).length === 1, 'the message');
    expect(h.fake.callsOf('conversations.open')[0].body.users).toBe(OWNER);
    expect(h.texts(OWNER_DM)).toEqual(['a note for you']);
  });
});
