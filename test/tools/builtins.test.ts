import { describe, it, expect } from 'vitest';
import { createSendMessageTool } from '../../tools/send-message.ts';
import { createClockTool } from '../../tools/clock.ts';
import { createEndTaskTool } from '../../tools/end-task.ts';
import { createThinkHarderTool } from '../../tools/think-harder.ts';
import { ToolRunner } from '#src/tools/runner.ts';
import { makePersona, makeToolContext } from '../support/persona.ts';
import type { Origin } from '../../src/turns.ts';

const sendMessage = createSendMessageTool();
const origin: Origin = { connector: 'telegram', chat: '1001', chatType: 'dm', sender: '1001', messageId: '55' };
const persona = makePersona({
  users: ['telegram:1001', 'telegram:1002'],
  primary: { connector: 'discord', to: 'chan-primary' },
  channels: [{ connector: 'discord', chat: 'chan-team', mention: true }],
});

describe('send_message: where it goes', () => {
  it('in a user turn, without a destination, sends to the chat the message came from', async () => {
    const ctx = makeToolContext({ persona, origin: { ...origin, thread: 't9' }, kind: 'user' });
    const out = await sendMessage.run({ text: 'hello there' }, ctx);
    expect(out).toBe('sent to telegram:1001:t9');
    expect(ctx.deliveries).toEqual([{ target: { connector: 'telegram', chat: '1001', thread: 't9' }, text: 'hello there', options: undefined }]);
  });

  it('in a background turn, without a destination, sends to the primary chat even when there is an origin', async () => {
    const ctx = makeToolContext({ persona, origin, kind: 'cron' });
    const out = await sendMessage.run({ text: 'daily digest' }, ctx);
    expect(out).toBe('sent to discord:chan-primary');
    expect(ctx.deliveries.map((d) => d.target)).toEqual([{ connector: 'discord', chat: 'chan-primary', thread: undefined }]);
  });

  it('in a background turn without a primary, falls back to the origin', async () => {
    const ctx = makeToolContext({ persona: makePersona({ users: ['telegram:1001'] }), origin, kind: 'wake' });
    expect(await sendMessage.run({ text: 'reminder' }, ctx)).toBe('sent to telegram:1001');
  });

  it('in a group, only the persona\'s own users can have it post elsewhere', async () => {
    const group: Origin = { connector: 'discord', chat: 'chan-team', chatType: 'group', sender: 'discord:stranger' };
    const fromStranger = makeToolContext({ persona, origin: group, kind: 'user' });
    expect(await sendMessage.run({ text: 'spam', connector: 'discord', to: 'chan-primary' }, fromStranger)).toMatch(/^error: discord:chan-primary is not one of your chats/);
    expect(await sendMessage.run({ text: 'here is fine' }, fromStranger)).toBe('sent to discord:chan-team');
    const fromOwner = makeToolContext({ persona, origin: { ...group, sender: 'telegram:1001' }, kind: 'user' });
    expect(await sendMessage.run({ text: 'note to self', connector: 'telegram', to: '1001' }, fromOwner)).toBe('sent to telegram:1001');
    expect(fromStranger.deliveries.map((d) => d.target.chat)).toEqual(['chan-team']);
  });

  it('never writes to a terminal unless the turn came from it or it is the primary', async () => {
    const ctx = makeToolContext({ persona, origin, kind: 'user', connectors: ['telegram', 'discord', 'terminal'] });
    expect(await sendMessage.run({ text: 'boo', connector: 'terminal', to: 'assistant' }, ctx)).toMatch(/^error: terminal:assistant is not one of your chats/);
  });

  it('allows an explicit connector and to for chats the persona belongs to', async () => {
    const ctx = makeToolContext({ persona, origin, kind: 'user' });
    expect(await sendMessage.run({ text: 'hi team', connector: 'discord', to: 'chan-team' }, ctx)).toBe('sent to discord:chan-team');
    expect(await sendMessage.run({ text: 'hi bob', connector: 'telegram', to: '1002' }, ctx)).toBe('sent to telegram:1002');
    expect(await sendMessage.run({ text: 'hi primary', connector: 'discord', to: 'chan-primary' }, ctx)).toBe('sent to discord:chan-primary');
    // `to` alone uses the origin's connector.
    expect(await sendMessage.run({ text: 'hi again', to: '1002' }, ctx)).toBe('sent to telegram:1002');
    expect(ctx.deliveries.map((d) => `${d.target.connector}:${d.target.chat}`)).toEqual([
      'discord:chan-team',
      'telegram:1002',
      'discord:chan-primary',
      'telegram:1002',
    ]);
  });

  it('refuses chats the persona does not belong to, with an error string, and sends nothing', async () => {
    const ctx = makeToolContext({ persona, origin, kind: 'user' });
    const out = await sendMessage.run({ text: 'spam', connector: 'telegram', to: '6666' }, ctx);
    expect(out).toMatch(/^error: telegram:6666 is not one of your chats/);
    const otherServer = await sendMessage.run({ text: 'spam', connector: 'discord', to: 'random-channel' }, ctx);
    expect(otherServer).toMatch(/^error: discord:random-channel is not one of your chats/);
    expect(ctx.deliveries).toHaveLength(0);
  });

  it('refuses a connector that is not configured', async () => {
    const ctx = makeToolContext({ persona, origin, kind: 'user', connectors: ['telegram'] });
    const out = await sendMessage.run({ text: 'x', connector: 'slack', to: 'C123' }, ctx);
    expect(out).toBe('error: no connector named "slack" is configured');
    expect(ctx.deliveries).toHaveLength(0);
  });

  it('asks for to when only a connector is given', async () => {
    const ctx = makeToolContext({ persona, origin, kind: 'user' });
    expect(await sendMessage.run({ text: 'x', connector: 'discord' }, ctx)).toBe('error: to (the chat id) is required when connector is given');
    expect(ctx.deliveries).toHaveLength(0);
  });

  it('gives a clear error when there is no destination at all', async () => {
    const ctx = makeToolContext({ persona: makePersona(), kind: 'heartbeat' });
    const out = await sendMessage.run({ text: 'anyone?' }, ctx);
    expect(out).toMatch(/^error: no destination: give connector and to, or set "primary"/);
    expect(ctx.deliveries).toHaveLength(0);
  });
});

describe('send_message: results', () => {
  it('dry_run checks the destination and sends nothing', async () => {
    const ctx = makeToolContext({ persona, origin, kind: 'user' });
    const out = await sendMessage.run({ text: 'twelve chars', dry_run: true }, ctx);
    expect(out).toBe('dry run: would send 12 characters to telegram:1001; nothing was sent');
    expect(ctx.deliveries).toHaveLength(0);
  });

  it('dry_run still reports a forbidden destination', async () => {
    const ctx = makeToolContext({ persona, origin, kind: 'user' });
    expect(await sendMessage.run({ text: 'x', connector: 'telegram', to: '6666', dry_run: true }, ctx)).toMatch(/^error: /);
    expect(ctx.deliveries).toHaveLength(0);
  });

  it('a duplicate is reported as ok, not as an error', async () => {
    const ctx = makeToolContext({ persona, origin, kind: 'user', deliverResult: { status: 'duplicate' } });
    const out = await sendMessage.run({ text: 'same again' }, ctx);
    expect(out).toBe('ok: the same message was already sent to telegram:1001 in this turn; not sent again');
  });

  it('reports queued and failed deliveries', async () => {
    const queued = makeToolContext({ persona, origin, kind: 'user', deliverResult: { status: 'queued' } });
    expect(await sendMessage.run({ text: 'x' }, queued)).toBe('queued for telegram:1001');
    const failed = makeToolContext({ persona, origin, kind: 'user', deliverResult: { status: 'failed', error: 'chat not found' } });
    expect(await sendMessage.run({ text: 'x' }, failed)).toBe('error: could not send to telegram:1001: chat not found');
  });

  it('through the runner, an empty text is rejected before anything is sent', async () => {
    const runner = new ToolRunner([sendMessage]);
    const ctx = makeToolContext({ persona, origin, kind: 'user' });
    const out = await runner.execute({ id: 'c1', name: 'send_message', arguments: '{"text":""}' }, [sendMessage], ctx);
    expect(out.content).toMatch(/^invalid_arguments: \/text/);
    expect(ctx.deliveries).toHaveLength(0);
  });
});

describe('clock', () => {
  const fixed = new Date('2024-03-10T12:34:56.000Z');
  const clock = createClockTool({ timezone: 'Europe/Berlin', now: () => fixed });

  it('shows the time in the default zone', async () => {
    const out = (await clock.run({}, makeToolContext())) as string;
    expect(out).toContain('13:34:56');
    expect(out).toContain('Sunday');
    expect(out).toContain('ISO (UTC): 2024-03-10T12:34:56.000Z');
    expect(out).toContain('time zone: Europe/Berlin');
  });

  it('shows the time in a requested zone', async () => {
    const out = (await clock.run({ timezone: 'America/New_York' }, makeToolContext())) as string;
    expect(out).toContain('08:34:56');
    expect(out).toContain('time zone: America/New_York');
  });

  it('answers a bad time zone with an error string instead of throwing', async () => {
    const out = await clock.run({ timezone: 'Mars/Olympus_Mons' }, makeToolContext());
    expect(out).toBe('error: "Mars/Olympus_Mons" is not a time zone; use an IANA name such as Europe/Berlin or America/New_York');
  });
});

describe('end_task', () => {
  const endTask = createEndTaskTool();

  it('returns endTurn with the status and summary', async () => {
    expect(await endTask.run({ status: 'skipped', summary: 'nothing new' }, makeToolContext())).toEqual({
      content: 'turn ended (skipped)',
      endTurn: { status: 'skipped', summary: 'nothing new' },
    });
    expect(await endTask.run({ status: 'failed' }, makeToolContext())).toEqual({
      content: 'turn ended (failed)',
      endTurn: { status: 'failed', summary: undefined },
    });
  });

  it('through the runner, rejects an unknown status', async () => {
    const runner = new ToolRunner([endTask]);
    const out = await runner.execute({ id: 'c1', name: 'end_task', arguments: '{"status":"done"}' }, [endTask], makeToolContext());
    expect(out.content).toBe('invalid_arguments: /status must be one of "ok", "skipped", "failed". Fix the arguments and call end_task again.');
    expect(out.endTurn).toBeUndefined();
  });
});

describe('think_harder', () => {
  it('asks the loop to think on later calls', async () => {
    const out = await createThinkHarderTool().run({ reason: 'tricky' }, makeToolContext());
    expect(out).toMatchObject({ thinking: true });
  });
});
