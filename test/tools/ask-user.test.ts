import { describe, expect, it } from 'vitest';
import { createAskUserTool } from '../../tools/ask-user.ts';
import { ToolRunner } from '#src/tools/runner.ts';
import type { ChoiceSpec, ToolOutput } from '#src/tools/types.ts';
import type { ToolCall } from '#src/llm/types.ts';
import { makePersona, makeToolContext, type TestToolContext } from '../support/persona.ts';
import type { DeliveryTarget, Origin } from '../../src/turns.ts';

const askUser = createAskUserTool();

const dmOrigin: Origin = { connector: 'telegram', chat: '1001', chatType: 'dm', sender: 'telegram:1001', messageId: '55' };
const terminalOrigin: Origin = { connector: 'terminal', chat: 'local', chatType: 'dm', sender: 'terminal:me' };
const persona = makePersona({
  users: ['telegram:1001', 'telegram:1002'],
  primary: { connector: 'discord', to: 'chan-primary' },
  channels: [{ connector: 'discord', chat: 'chan-team', mention: true }],
});
const noPrimary = makePersona({ users: ['telegram:1001'] });

interface AskRequest {
  question: string;
  choices: ChoiceSpec[];
  expiresInMs: number;
  destination: DeliveryTarget;
}

/** The askUser calls the tool made. */
function asked(ctx: TestToolContext): AskRequest[] {
  return ctx.questions.filter((q) => q.type === 'ask').map((q) => q.request as AskRequest);
}

function output(value: string | ToolOutput): ToolOutput {
  return typeof value === 'string' ? { content: value } : value;
}

let callSeq = 0;
function call(args: unknown): ToolCall {
  return { id: `call_${++callSeq}`, name: 'ask_user', arguments: typeof args === 'string' ? args : JSON.stringify(args) };
}

describe('ask_user: what it asks', () => {
  it('defaults to Yes/No and a one-hour expiry, asks in the current chat, and ends the turn', async () => {
    const ctx = makeToolContext({ persona, origin: dmOrigin, kind: 'user' });
    const out = output(await askUser.run({ question: 'Deploy now?' }, ctx));
    expect(asked(ctx)).toEqual([
      { question: 'Deploy now?', choices: ['Yes', 'No'], expiresInMs: 60 * 60_000, destination: { connector: 'telegram', chat: '1001', thread: undefined } },
    ]);
    expect(out.content).toBe('asked Q#questi in telegram:1001; the answer will arrive as a new message. Your turn ends here.');
    expect(out.endTurn).toEqual({ status: 'ok', summary: 'asked Q#questi' });
  });

  it('passes the given choices through, and keeps the thread of the current chat', async () => {
    const ctx = makeToolContext({ persona, origin: { ...dmOrigin, thread: 't7' }, kind: 'user' });
    await askUser.run({ question: 'Which one?', choices: ['A', 'B', 'C'] }, ctx);
    expect(asked(ctx)[0]).toMatchObject({ choices: ['A', 'B', 'C'], destination: { connector: 'telegram', chat: '1001', thread: 't7' } });
  });

  it.each([
    ['30m', 30 * 60_000],
    ['2h', 2 * 60 * 60_000],
    ['1.5 hours', 90 * 60_000],
    ['1d', 24 * 60 * 60_000],
    ['30d', 30 * 24 * 60 * 60_000],
    ['90s', 90_000],
    [90, 90_000],
    ['600', 600_000],
    [10, 10_000],
  ] as const)('expires_in %j is %i ms', async (expiresIn, ms) => {
    const ctx = makeToolContext({ persona, origin: dmOrigin, kind: 'user' });
    const out = output(await askUser.run({ question: 'Ok?', expires_in: expiresIn }, ctx));
    expect(out.endTurn?.status).toBe('ok');
    expect(asked(ctx)[0].expiresInMs).toBe(ms);
  });

  it.each([
    ['soon', /^error: expires_in "soon" is not a duration/],
    ['5ms', /^error: expires_in "5ms" is not a duration/],
    ['-5', /^error: expires_in "-5" is not a duration/],
    ['', /^error: expires_in "" is not a duration/],
    [9, /^error: expires_in must be between 10 seconds and 30 days$/],
    [0, /^error: expires_in must be between 10 seconds and 30 days$/],
    ['31d', /^error: expires_in must be between 10 seconds and 30 days$/],
    ['5w', /^error: expires_in must be between 10 seconds and 30 days$/],
  ] as const)('refuses expires_in %j without asking anything', async (expiresIn, message) => {
    const ctx = makeToolContext({ persona, origin: dmOrigin, kind: 'user' });
    const out = output(await askUser.run({ question: 'Ok?', expires_in: expiresIn }, ctx));
    expect(out.content).toMatch(message);
    expect(out.endTurn).toBeUndefined();
    expect(asked(ctx)).toEqual([]);
  });
});

describe('ask_user: the parameters schema', () => {
  const runner = new ToolRunner([askUser]);

  it('rejects more than 5 choices before the tool runs', async () => {
    const ctx = makeToolContext({ persona, origin: dmOrigin, kind: 'user' });
    const out = await runner.execute(call({ question: 'Pick', choices: ['1', '2', '3', '4', '5', '6'] }), [askUser], ctx);
    expect(out.content).toMatch(/^invalid_arguments: \/choices must NOT have more than 5 items/);
    expect(out.endTurn).toBeUndefined();
    expect(asked(ctx)).toEqual([]);
    expect((askUser.parameters as { properties: { choices: { maxItems: number } } }).properties.choices.maxItems).toBe(5);
  });

  it.each([
    ['no question', { choices: ['a'] }, /missing required property "question"/],
    ['an empty question', { question: '' }, /\/question must NOT have fewer than 1 characters/],
    ['no choices at all', { question: 'x', choices: [] }, /\/choices must NOT have fewer than 1 items/],
    ['duplicate choices', { question: 'x', choices: ['a', 'a'] }, /\/choices must NOT have duplicate items/],
    ['an over-long choice', { question: 'x', choices: ['c'.repeat(61)] }, /\/choices\/0 must NOT have more than 60 characters/],
    ['an unknown property', { question: 'x', urgent: true }, /unknown property "urgent"/],
    ['a boolean expires_in', { question: 'x', expires_in: true }, /\/expires_in must be string,number/],
  ])('rejects %s', async (_what, args, message) => {
    const ctx = makeToolContext({ persona, origin: dmOrigin, kind: 'user' });
    const out = await runner.execute(call(args), [askUser], ctx);
    expect(out.content).toMatch(/^invalid_arguments: /);
    expect(out.content).toMatch(message);
    expect(asked(ctx)).toEqual([]);
  });

  it('a valid call through the runner keeps endTurn, so the loop stops', async () => {
    const ctx = makeToolContext({ persona, origin: dmOrigin, kind: 'user' });
    const out = await runner.execute(call({ question: 'Go?', choices: ['1', '2', '3', '4', '5'] }), [askUser], ctx);
    expect(out.endTurn).toEqual({ status: 'ok', summary: 'asked Q#questi' });
    expect(asked(ctx)[0].choices).toEqual(['1', '2', '3', '4', '5']);
  });
});

describe('ask_user: where it asks', () => {
  it('in its own chat when that chat shows buttons', async () => {
    const ctx = makeToolContext({ persona, origin: dmOrigin, kind: 'user' });
    await askUser.run({ question: 'Q?' }, ctx);
    expect(asked(ctx)[0].destination).toEqual({ connector: 'telegram', chat: '1001', thread: undefined });
  });

  it('from the terminal (no buttons), even with a primary: in the terminal itself, answered by typing', async () => {
    const ctx = makeToolContext({ persona, origin: terminalOrigin, kind: 'user' });
    const out = output(await askUser.run({ question: 'Q?' }, ctx));
    expect(asked(ctx)[0].destination).toEqual({ connector: 'terminal', chat: 'local', thread: undefined });
    expect(out.content).toContain('in terminal:local');
  });

  it('from the terminal without a primary: in the terminal', async () => {
    const ctx = makeToolContext({ persona: noPrimary, origin: terminalOrigin, kind: 'user' });
    await askUser.run({ question: 'Q?' }, ctx);
    expect(asked(ctx)[0].destination).toEqual({ connector: 'terminal', chat: 'local', thread: undefined });
  });

  it('from a chat of a connector without buttons: in that chat, answered by typing', async () => {
    const ctx = makeToolContext({ persona, origin: { connector: 'sms', chat: '+100', chatType: 'dm', sender: 'sms:+100' }, kind: 'user' });
    await askUser.run({ question: 'Q?' }, ctx);
    expect(asked(ctx)[0].destination).toEqual({ connector: 'sms', chat: '+100', thread: undefined });
  });

  it('in a background turn: the primary, even when the turn has an origin', async () => {
    const ctx = makeToolContext({ persona, origin: dmOrigin, kind: 'cron' });
    await askUser.run({ question: 'Q?' }, ctx);
    expect(asked(ctx)[0].destination).toEqual({ connector: 'discord', chat: 'chan-primary', thread: undefined });
  });

  it('with no chat and no primary: refuses', async () => {
    const ctx = makeToolContext({ persona: noPrimary, kind: 'wake' });
    const out = output(await askUser.run({ question: 'Q?' }, ctx));
    expect(out.content).toBe('error: no chat to ask in: give connector and to, or set "primary" in connectors.jsonc');
    expect(out.endTurn).toBeUndefined();
    expect(asked(ctx)).toEqual([]);
  });

  it('explicit connector+to: allowed for the persona\'s own chats (users, channels, primary)', async () => {
    for (const [connector, to] of [
      ['telegram', '1002'],
      ['discord', 'chan-team'],
      ['discord', 'chan-primary'],
    ]) {
      const ctx = makeToolContext({ persona, origin: dmOrigin, kind: 'user' });
      const out = output(await askUser.run({ question: 'Q?', connector, to, thread: 'th' }, ctx));
      expect(out.endTurn?.status, `${connector}:${to}`).toBe('ok');
      expect(asked(ctx)[0].destination).toEqual({ connector, chat: to, thread: 'th' });
    }
  });

  it('explicit `to` alone means a chat on the current connector', async () => {
    const ctx = makeToolContext({ persona, origin: dmOrigin, kind: 'user' });
    await askUser.run({ question: 'Q?', to: '1002' }, ctx);
    expect(asked(ctx)[0].destination).toEqual({ connector: 'telegram', chat: '1002', thread: undefined });
  });

  it('explicit connector+to: refused for anyone else\'s chat', async () => {
    const ctx = makeToolContext({ persona, origin: dmOrigin, kind: 'user' });
    const out = output(await askUser.run({ question: 'Q?', connector: 'telegram', to: '666' }, ctx));
    expect(out.content).toBe('error: telegram:666 is not one of your chats (users, channels or primary in connectors.jsonc)');
    expect(asked(ctx)).toEqual([]);
  });

  it('explicit destination: refused on an unknown connector, or with only one half given', async () => {
    const ctx = makeToolContext({ persona, origin: dmOrigin, kind: 'user' });
    expect(output(await askUser.run({ question: 'Q?', connector: 'matrix', to: '1001' }, ctx)).content).toBe('error: no connector named "matrix" is configured');
    expect(output(await askUser.run({ question: 'Q?', connector: 'telegram' }, ctx)).content).toBe('error: give both connector and to (the chat id), or neither');
    const noOrigin = makeToolContext({ persona, kind: 'cron' });
    expect(output(await askUser.run({ question: 'Q?', to: '1001' }, noOrigin)).content).toBe('error: give both connector and to (the chat id), or neither');
    expect([...asked(ctx), ...asked(noOrigin)]).toEqual([]);
  });

  it('in a group, a stranger cannot have it ask elsewhere; the persona\'s own user can', async () => {
    const group: Origin = { connector: 'discord', chat: 'chan-team', chatType: 'group', sender: 'discord:stranger' };
    const fromStranger = makeToolContext({ persona, origin: group, kind: 'user' });
    const refused = output(await askUser.run({ question: 'Q?', connector: 'telegram', to: '1001' }, fromStranger));
    expect(refused.content).toMatch(/^error: telegram:1001 is not one of your chats/);
    expect(asked(fromStranger)).toEqual([]);

    const fromUser = makeToolContext({ persona, origin: { ...group, sender: 'telegram:1001' }, kind: 'user' });
    await askUser.run({ question: 'Q?', connector: 'telegram', to: '1001' }, fromUser);
    expect(asked(fromUser)[0].destination).toEqual({ connector: 'telegram', chat: '1001', thread: undefined });
    // Its own group chat is always fine.
    const here = makeToolContext({ persona, origin: group, kind: 'user' });
    await askUser.run({ question: 'Q?' }, here);
    expect(asked(here)[0].destination).toEqual({ connector: 'discord', chat: 'chan-team', thread: undefined });
  });

  it('a failure to show the question surfaces as an error of the tool (the runner reports it as crashed)', async () => {
    const ctx: TestToolContext = {
      ...makeToolContext({ persona, origin: dmOrigin, kind: 'user' }),
      askUser: async () => {
        throw new Error('the question could not be sent to telegram:1001: blocked');
      },
    };
    const out = await new ToolRunner([askUser]).execute(call({ question: 'Q?' }), [askUser], ctx);
    expect(out.content).toBe('crashed: ask_user failed: the question could not be sent to telegram:1001: blocked');
    expect(out.endTurn).toBeUndefined();
  });
});
