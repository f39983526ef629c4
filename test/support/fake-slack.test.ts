// Proves the fake Slack against a real Bolt App in Socket Mode (and Bolt's own request verification for HTTP mode),
// so a connector tested on the fake meets the same client code paths as on Slack.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { App, LogLevel, SocketModeReceiver, verifySlackRequest, type Logger } from '@slack/bolt';
import { signedRequest, startFakeSlack, type FakeSlack } from './fake-slack.ts';

const ALICE = 'U0ALICE';
const TEAM_CHANNEL = 'C0TEAM';
const fastRetries = { retries: 2, factor: 1, minTimeout: 100, maxTimeout: 200 };
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Bolt, socket-mode and web-api share the App's logger: keep what they say at warn and above. */
function recordingLogger(): Logger & { lines: string[] } {
  const lines: string[] = [];
  const keep = (level: string) => (...msg: unknown[]) => void lines.push(`${level} ${msg.map(String).join(' ')}`);
  return {
    lines,
    debug: () => undefined,
    info: () => undefined,
    warn: keep('warn'),
    error: keep('error'),
    setLevel: () => undefined,
    getLevel: () => LogLevel.WARN,
    setName: () => undefined,
  };
}

interface Seen {
  event: any;
  context: { retryNum?: number; retryReason?: string; botUserId?: string };
  body: any;
}

describe('fake-slack with a Bolt App in Socket Mode', () => {
  let fake: FakeSlack;
  let app: App;
  const logger = recordingLogger();
  const messages: Seen[] = [];
  const mentions: Seen[] = [];
  const clicks: { action: any; body: any; ackedAt: number }[] = [];

  beforeAll(async () => {
    fake = await startFakeSlack();
    app = new App({
      token: fake.botToken,
      appToken: fake.appToken,
      socketMode: true,
      logger,
      clientOptions: { slackApiUrl: fake.apiUrl, retryConfig: fastRetries },
    });
    app.message(async ({ message, context, body, client }) => {
      messages.push({ event: message, context, body });
      const m = message as any;
      if (m.text === 'whisper') await client.chat.postEphemeral({ channel: m.channel, user: m.user, text: 'only you see this' });
    });
    app.event('app_mention', async ({ event, say, context, body }) => {
      mentions.push({ event, context, body });
      // The thread the mention is in, or a new one on the mention itself.
      await say({ text: `on it, <@${event.user}>`, thread_ts: event.thread_ts ?? event.ts });
    });
    app.action('approve', async ({ ack, action, body, respond }) => {
      await ack();
      clicks.push({ action, body, ackedAt: Date.now() });
      // Slow work after the ack must not delay it.
      await sleep(300);
      await respond({ replace_original: true, text: 'Approved' });
    });
  });

  afterAll(async () => {
    await app?.stop();
    await fake?.close();
    // Nothing went wrong but what the tests scripted (no socket errors at the close, among others).
    expect(logger.lines.filter((l) => !/json-pointer|A rate limit was exceeded/.test(l))).toEqual([]);
  });

  it('connects through apps.connections.open on slackApiUrl and starts only once hello arrives', async () => {
    fake.holdHello(true);
    let started = false;
    const start = app.start().then(() => (started = true));
    await fake.waitFor(() => fake.totalConnections() === 1);
    await sleep(200);
    expect(started).toBe(false);
    fake.holdHello(false);
    await start;
    expect(fake.openConnections()).toBe(1);
    // Bolt checks its bot token at construction; socket mode asks for a URL with the app-level token.
    expect(fake.callsOf('auth.test').map((c) => c.token)).toEqual([fake.botToken]);
    const opens = fake.callsOf('apps.connections.open');
    expect(opens.map((c) => [c.token, c.status])).toEqual([[fake.appToken, 200]]);
  });

  it('delivers a DM to app.message and gets its ack at once, retry fields at their first-delivery values', async () => {
    const delivery = await fake.dm({ user: ALICE, text: 'hello there' });
    expect(delivery).toMatchObject({ delivered: true, acked: true, ackPayload: {} });
    expect(delivery.latencyMs).toBeLessThan(1000);
    const seen = await fake.waitFor(() => messages.find((m) => m.event.text === 'hello there'));
    expect(seen.event).toMatchObject({ type: 'message', channel_type: 'im', channel: 'D0ALICE', user: ALICE });
    expect(seen.body.event_id).toBe(delivery.envelope.payload.event_id);
    // Socket Mode's retry_attempt / retry_reason reach the listener as context.retryNum / retryReason.
    expect(seen.context).toMatchObject({ retryNum: 0, retryReason: '', botUserId: fake.botUserId });
  });

  it('shows a redelivery (retry_attempt 1) to the handler with the same event id', async () => {
    const first = await fake.dm({ user: ALICE, text: 'are you there?' });
    const again = await fake.redeliver(first, { retryReason: 'timeout' });
    expect(again.acked).toBe(true);
    expect(again.envelope).toMatchObject({ retry_attempt: 1, retry_reason: 'timeout' });
    const seen = await fake.waitFor(() => {
      const both = messages.filter((m) => m.event.text === 'are you there?');
      return both.length === 2 && both;
    });
    expect(seen.map((s) => s.context.retryNum)).toEqual([0, 1]);
    expect(seen[1].context.retryReason).toBe('timeout');
    expect(seen[1].body.event_id).toBe(seen[0].body.event_id);
    expect(seen[1].body.event_time).toBe(seen[0].body.event_time);
  });

  it('sends app_mention and message for one mention; say() in the thread is recorded with it', async () => {
    const root = await fake.channelMessage({ user: ALICE, channel: TEAM_CHANNEL, text: 'deploy is failing' });
    const rootTs = root.envelope.payload.event.ts;
    const { mention, message } = await fake.mention({ user: ALICE, channel: TEAM_CHANNEL, text: 'can you look?', thread_ts: rootTs });
    expect([mention.acked, message.acked]).toEqual([true, true]);
    expect(mention.envelope.payload.event).toMatchObject({ type: 'app_mention', text: `<@${fake.botUserId}> can you look?`, thread_ts: rootTs, parent_user_id: ALICE });
    expect(message.envelope.payload.event).toMatchObject({ type: 'message', channel_type: 'channel', ts: mention.envelope.payload.event.ts });
    expect(message.envelope.payload.event_id).not.toBe(mention.envelope.payload.event_id);

    const [reply] = await fake.waitFor(() => fake.messages(TEAM_CHANNEL).length === 1 && fake.messages(TEAM_CHANNEL));
    expect(reply).toMatchObject({ text: `on it, <@${ALICE}>`, thread_ts: rootTs, user: fake.botUserId, bot_id: fake.botId });
    expect(mentions).toHaveLength(1);
    // Slack echoes the bot's own post as a message event; Bolt's ignoreSelf drops it before app.message.
    const echo = await fake.waitFor(() => fake.deliveries.find((d) => d.envelope.payload.event.ts === reply.ts && d.acked));
    expect(echo.envelope.payload.event).toMatchObject({ bot_id: fake.botId, user: fake.botUserId });
    await sleep(100);
    expect(messages.filter((m) => m.event.ts === reply.ts)).toEqual([]);
  });

  it('records chat.postEphemeral with its user', async () => {
    await fake.dm({ user: ALICE, text: 'whisper' });
    const [ephemeral] = await fake.waitFor(() => fake.ephemerals('D0ALICE', ALICE).length === 1 && fake.ephemerals('D0ALICE', ALICE));
    expect(ephemeral).toMatchObject({ user: ALICE, text: 'only you see this' });
    expect(ephemeral.message_ts).toMatch(/^\d{10}\.\d{6}$/);
    expect(fake.messages('D0ALICE')).toEqual([]);
  });

  it('delivers a block_actions click to app.action, acked well within 3 s, and applies respond()', async () => {
    const posted = await app.client.chat.postMessage({
      channel: TEAM_CHANNEL,
      text: 'Run the migration?',
      blocks: [
        { type: 'section', text: { type: 'mrkdwn', text: '*Run the migration?*' } },
        { type: 'actions', block_id: 'q1', elements: [{ type: 'button', action_id: 'approve', text: { type: 'plain_text', text: 'Approve' }, value: 'q1:yes' }] },
      ],
    });
    const sentAt = Date.now();
    const delivery = await fake.click({ message: { channel: TEAM_CHANNEL, ts: posted.ts! }, label: 'Approve', user: ALICE });
    expect(delivery.acked).toBe(true);
    expect(delivery.latencyMs).toBeLessThan(3000);
    expect(Date.now() - sentAt).toBeLessThan(3000);
    // Acked before the listener's slow work (respond() comes 300 ms after ack()).
    expect(fake.responses).toHaveLength(0);
    const [click] = await fake.waitFor(() => clicks.length === 1 && clicks);
    expect(click.action).toMatchObject({ action_id: 'approve', block_id: 'q1', value: 'q1:yes', type: 'button' });
    expect(click.body).toMatchObject({ type: 'block_actions', user: { id: ALICE }, channel: { id: TEAM_CHANNEL }, container: { message_ts: posted.ts, channel_id: TEAM_CHANNEL } });
    expect(click.body.trigger_id).toBeTruthy();
    const updated = await fake.waitFor(() => fake.messages(TEAM_CHANNEL).find((m) => m.ts === posted.ts && m.text === 'Approved'));
    expect(updated.edits).toBe(1);
    expect(fake.responses.map((r) => r.body)).toEqual([{ replace_original: true, text: 'Approved' }]);
    expect(() => fake.blockActions({ message: { channel: TEAM_CHANNEL, ts: posted.ts! }, actionId: 'nope', user: ALICE })).toThrow(/no button/);
  });

  it('retries a 429 on chat.postMessage once Retry-After has passed, and posts once', async () => {
    fake.failNext('chat.postMessage', { error: 'ratelimited', status: 429, retryAfter: 1 });
    const result = await app.client.chat.postMessage({ channel: 'C0RATE', text: 'slow down' });
    expect(result.ok).toBe(true);
    const attempts = fake.callsOf('chat.postMessage').filter((c) => c.body.channel === 'C0RATE');
    expect(attempts.map((c) => c.status)).toEqual([429, 200]);
    expect(attempts[1].at - attempts[0].at).toBeGreaterThanOrEqual(1000);
    expect(fake.messages('C0RATE').map((m) => m.text)).toEqual(['slow down']);
    expect(logger.lines.filter((l) => l.includes('A rate limit was exceeded'))).toHaveLength(1);
  });

  it('answers invalid_blocks and msg_too_long with HTTP 200 ok:false (not retried), and retries a 5xx', async () => {
    await expect(app.client.chat.postMessage({ channel: 'C0BAD', text: 'x', blocks: [{ type: 'section', text: { type: 'mrkdwn', text: 'y'.repeat(3001) } }] })).rejects.toMatchObject({
      data: { error: 'invalid_blocks' },
    });
    fake.failNext('chat.postMessage', { error: 'msg_too_long' });
    await expect(app.client.chat.postMessage({ channel: 'C0BAD', text: 'short' })).rejects.toMatchObject({ data: { error: 'msg_too_long' } });
    expect(fake.callsOf('chat.postMessage').filter((c) => c.body.channel === 'C0BAD').map((c) => [c.status, (c.response as any).error])).toEqual([
      [200, 'invalid_blocks'],
      [200, 'msg_too_long'],
    ]);
    // web-api logs the reason Slack gives in response_metadata.messages.
    expect(logger.lines).toContain('error must be less than 3001 characters [json-pointer:/blocks/0/text/text]');
    fake.failNext('chat.update', { status: 503 });
    const [first] = fake.messages(TEAM_CHANNEL);
    await app.client.chat.update({ channel: TEAM_CHANNEL, ts: first.ts, text: 'edited' });
    expect(fake.callsOf('chat.update').map((c) => c.status)).toEqual([503, 200]);
    expect(fake.messages(TEAM_CHANNEL)[0]).toMatchObject({ text: 'edited', edits: 1 });
    // The bot's own edit comes back as message_changed, which Bolt's ignoreSelf lets through (no event.user).
    const changed = await fake.waitFor(() => messages.find((m) => m.event.subtype === 'message_changed' && m.event.message.text === 'edited'));
    expect(changed.event.message).toMatchObject({ ts: first.ts, bot_id: fake.botId, user: fake.botUserId });
  });

  it('answers the other Web API methods a connector uses', async () => {
    await expect(app.client.auth.test({ token: 'xoxb-wrong' })).rejects.toMatchObject({ data: { error: 'invalid_auth' } });
    const opened = await app.client.conversations.open({ users: ALICE });
    expect(opened.channel?.id).toBe('D0ALICE');
    const info = await app.client.conversations.info({ channel: 'D0ALICE' });
    expect(info.channel).toMatchObject({ is_im: true, user: ALICE });
    const user = await app.client.users.info({ user: ALICE });
    expect(user.user).toMatchObject({ id: ALICE, is_bot: false });
    const dm = fake.message('D0ALICE', (await fake.dm({ user: ALICE, text: 'react to me' })).envelope.payload.event.ts)!;
    await app.client.reactions.add({ channel: 'D0ALICE', timestamp: dm.ts, name: 'eyes' });
    await expect(app.client.reactions.add({ channel: 'D0ALICE', timestamp: dm.ts, name: ':eyes:' })).rejects.toMatchObject({ data: { error: 'invalid_name' } });
    expect(fake.message('D0ALICE', dm.ts)?.reactions).toEqual(['eyes']);
    await app.client.assistant.threads.setStatus({ channel_id: 'D0ALICE', thread_ts: dm.ts, status: 'is thinking…' });
    expect(fake.statuses).toEqual([{ channel: 'D0ALICE', thread_ts: dm.ts, status: 'is thinking…' }]);
    const deleted = await app.client.chat.postMessage({ channel: ALICE, text: 'to be deleted' });
    expect(deleted.channel).toBe('D0ALICE');
    await app.client.chat.delete({ channel: 'D0ALICE', ts: deleted.ts! });
    expect(fake.messages('D0ALICE').map((m) => m.text)).toEqual([]);
  });

  it('takes a files.uploadV2 upload (URL, bytes, completion) and shares it in the thread', async () => {
    const thread = fake.messages(TEAM_CHANNEL)[0].ts;
    const result: any = await app.client.files.uploadV2({ channel_id: TEAM_CHANNEL, thread_ts: thread, content: 'report body', filename: 'report.txt', initial_comment: 'the report' });
    expect(result.ok).toBe(true);
    expect(fake.callsOf('files.getUploadURLExternal')[0].body).toMatchObject({ filename: 'report.txt', length: '11' });
    const [file] = fake.files;
    expect(file.bytes?.toString()).toBe('report body');
    const share = fake.messages(TEAM_CHANNEL).find((m) => m.files);
    expect(share).toMatchObject({ text: 'the report', thread_ts: thread, files: [{ id: file.id, name: 'report.txt' }] });
    expect(result.files[0].files[0].shares.public[TEAM_CHANNEL][0].ts).toBe(share!.ts);
  });

  it('reconnects after the socket is closed (a new apps.connections.open), and a later event still arrives', async () => {
    const opensBefore = fake.callsOf('apps.connections.open').length;
    const closedAt = Date.now();
    fake.disconnect();
    await fake.waitFor(() => fake.openConnections() === 0);
    // Sent while no socket is open: held until the client is back, as Slack holds it.
    const delivery = await fake.sendEvent(
      { type: 'message', user: ALICE, text: 'after the reconnect', ts: '1700000001.000100', channel: 'D0ALICE', channel_type: 'im', event_ts: '1700000001.000100' },
      { timeoutMs: 10_000 },
    );
    expect(delivery.acked).toBe(true);
    // socket-mode waits clientPingTimeout (5 s by default) times the consecutive failures before reconnecting.
    expect(Date.now() - closedAt).toBeGreaterThanOrEqual(4500);
    expect(fake.callsOf('apps.connections.open')).toHaveLength(opensBefore + 1);
    expect(fake.totalConnections()).toBe(2);
    await fake.waitFor(() => messages.find((m) => m.event.text === 'after the reconnect'));
  });
});

describe('fake-slack: a watchdog against a silent socket', () => {
  it('a client that pings and hears no pong reconnects; a disconnect warning also makes it reconnect', async () => {
    const fake = await startFakeSlack({ pingIntervalMs: 200 });
    const clientOptions = { slackApiUrl: fake.apiUrl, retryConfig: fastRetries };
    const receiver = new SocketModeReceiver({ appToken: fake.appToken, clientPingTimeout: 400, logLevel: LogLevel.ERROR, installerOptions: { clientOptions } });
    const app = new App({ token: fake.botToken, receiver, clientOptions, logLevel: LogLevel.ERROR });
    const seen: string[] = [];
    app.message(async ({ message }) => void seen.push((message as any).text));
    try {
      await app.start();
      fake.setSilent(true);
      await fake.waitFor(() => fake.openConnections() === 0, 5000);
      fake.setSilent(false);
      await fake.waitFor(() => fake.totalConnections() === 2 && fake.openConnections() === 1, 5000);
      fake.sendDisconnectWarning('refresh_requested');
      await fake.waitFor(() => fake.totalConnections() === 3 && fake.openConnections() === 1, 5000);
      expect(fake.callsOf('apps.connections.open')).toHaveLength(3);
      await fake.dm({ user: ALICE, text: 'still there?' });
      await fake.waitFor(() => seen.includes('still there?'));
    } finally {
      await app.stop();
      await fake.close();
    }
  });

  it('a Socket Mode App left without retryConfig gives its clients socket-mode’s 100-retry policy', async () => {
    const fake = await startFakeSlack();
    const app = new App({ token: fake.botToken, appToken: fake.appToken, socketMode: true, logLevel: LogLevel.ERROR, clientOptions: { slackApiUrl: fake.apiUrl } });
    // SocketModeClient writes its retryConfig into the clientOptions object it shares with the App, and the
    // clients Bolt hands to listeners are built from it.
    expect(app.webClientOptions.retryConfig).toEqual({ retries: 100, factor: 1.3 });
    await fake.waitFor(() => fake.callsOf('auth.test').length === 1);
    await fake.close();
  });
});

describe('fake-slack: HTTP-mode signatures', () => {
  const secret = 'fake-signing-secret';
  const verify = (request: { body: string; headers: Record<string, string> }) =>
    verifySlackRequest({
      signingSecret: secret,
      body: request.body,
      headers: { 'x-slack-signature': request.headers['x-slack-signature'], 'x-slack-request-timestamp': Number(request.headers['x-slack-request-timestamp']) },
    });

  it('signs a request the way @slack/bolt verifies it, and a tampered or stale one is rejected', async () => {
    const fake = await startFakeSlack();
    try {
      const body = JSON.stringify(fake.eventCallback({ type: 'message', user: ALICE, text: 'hi', ts: '1700000000.000100', channel: 'D0ALICE', channel_type: 'im' }));
      const good = signedRequest(body, secret, { retryNum: 1, retryReason: 'http_timeout' });
      expect(good.headers).toMatchObject({ 'content-type': 'application/json', 'x-slack-retry-num': '1', 'x-slack-retry-reason': 'http_timeout' });
      expect(good.headers['x-slack-signature']).toMatch(/^v0=[0-9a-f]{64}$/);
      expect(() => verify(good)).not.toThrow();
      expect(() => verify(signedRequest(body, secret, { badSignature: true }))).toThrow(/signature mismatch/);
      expect(() => verify({ ...good, body: body.replace('hi', 'hI') })).toThrow(/signature mismatch/);
      expect(() => verify(signedRequest(body, secret, { timestamp: Math.floor(Date.now() / 1000) - 6 * 60 }))).toThrow(/stale/);
    } finally {
      await fake.close();
    }
  });
});
