// The scenarios every chat connector must pass, written once against a PlatformDriver. A scenario that needs what a
// platform does not have (groups, buttons, other people) is not registered for it.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { RecordedRequest } from '../support/fake-llm.ts';
import { until } from '../support/until.ts';
import type { BotMessage, ChatName, DriverCapabilities, Person, PlatformDriver } from './driver.ts';

export interface Scenario {
  name: string;
  /** Whether the scenario means anything on a platform with these capabilities (all, when absent). */
  applies?(capabilities: DriverCapabilities): boolean;
  run(driver: PlatformDriver): Promise<void>;
  timeoutMs?: number;
}

/** How long a chat must stay quiet for silence to count (after the platform has its acknowledgement). */
const QUIET_MS = 500;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function describeSent(d: PlatformDriver, chat: ChatName): string {
  return `; ${chat} has ${JSON.stringify(d.sent(chat).map((m) => m.text.slice(0, 120)))}`;
}

/** The first message in `chat` whose text matches, once it is there. */
function waitForMessage(d: PlatformDriver, chat: ChatName, pattern: RegExp, timeoutMs = 10_000): Promise<BotMessage> {
  return until(() => d.sent(chat).find((m) => pattern.test(m.text)), () => `a message matching ${pattern}${describeSent(d, chat)}`, timeoutMs);
}

/** The newest message in `chat` that offers choices. */
function waitForQuestion(d: PlatformDriver, chat: ChatName = 'dm:owner'): Promise<BotMessage> {
  return until(() => d.sent(chat).findLast((m) => m.choices.length > 0), () => `a question with choices${describeSent(d, chat)}`);
}

/** The message with this id as the chat shows it now. */
function current(d: PlatformDriver, chat: ChatName, message: BotMessage): BotMessage {
  const found = d.sent(chat).find((m) => m.id === message.id);
  if (!found) throw new Error(`message ${message.id} is gone from ${chat}`);
  return found;
}

/** The message once its text matches `pattern` (an edit shows the outcome). */
function waitForEdit(d: PlatformDriver, chat: ChatName, message: BotMessage, pattern: RegExp): Promise<BotMessage> {
  return until(() => {
    const now = current(d, chat, message);
    return pattern.test(now.text) ? now : undefined;
  }, () => `message ${message.id} to show ${pattern}; it reads ${JSON.stringify(current(d, chat, message).text)}`);
}

/** Picks a choice the way the platform offers it: a click, or typing its number where there are no buttons. */
async function choose(d: PlatformDriver, question: BotMessage, label: string, as: Person = 'owner') {
  if (d.capabilities.buttons) return d.click(question, label, as);
  const index = question.choices.indexOf(label);
  if (index < 0) throw new Error(`no choice "${label}" in ${JSON.stringify(question.choices)}`);
  await d.dm(as, String(index + 1));
  return undefined;
}

/** Whitespace aside, the same characters in the same order. */
const squeeze = (text: string) => text.replace(/\s+/g, ' ').trim();

function toolResult(req: RecordedRequest): string {
  return (req.body.messages as { role: string; content: string }[]).findLast((m) => m.role === 'tool')?.content ?? '(no tool result)';
}

/** The model calls record_step with `note`, then says what the tool answered. */
function scriptRecordStep(d: PlatformDriver, note: string, after: { delayMs?: number } = {}) {
  d.model.script({ toolCalls: [{ name: 'record_step', arguments: { note } }] }, (req) => ({ text: `result: ${toolResult(req)}`, delayMs: after.delayMs }));
}

const inGroups = (c: DriverCapabilities) => c.groups;

export const SCENARIOS: Scenario[] = [
  {
    name: 'a DM from the owner is answered',
    async run(d) {
      await d.dm('owner', 'hello there');
      const reply = await waitForMessage(d, 'dm:owner', /hello there/);
      expect(reply.text).toBe('echo: hello there');
      await d.idle('dm:owner');
      expect(d.sent('dm:owner')).toHaveLength(1);
      expect(d.model.requests).toHaveLength(1);
    },
  },
  {
    name: 'a stranger is refused once, told their id, and the model is never called',
    applies: (c) => c.otherPeople,
    async run(d) {
      await d.dm('stranger', 'let me in');
      const refusal = await until(() => d.sent('dm:stranger')[0], 'the refusal');
      expect(refusal.text).toContain(d.address('stranger'));
      await d.dm('stranger', 'hello? anyone?');
      await sleep(QUIET_MS);
      expect(d.sent('dm:stranger')).toHaveLength(1);
      expect(d.model.requests).toHaveLength(0);
    },
  },
  {
    name: 'a mention in the group is answered in the group, quoting the message',
    applies: inGroups,
    async run(d) {
      const asked = await d.post('team', 'what is up', { mention: true });
      const reply = await waitForMessage(d, 'team', /what is up/);
      if (d.capabilities.replyReferences) expect(reply.replyTo).toBe(asked.id);
      // In place: in the group itself, or in a thread on the mentioned message where the platform answers so.
      expect(reply.thread).toBe(d.capabilities.mentionOpensThread ? asked.id : undefined);
      await d.idle('team');
      expect(d.sent('team')).toHaveLength(1);
      expect(d.sent('dm:owner')).toHaveLength(0);
    },
  },
  {
    name: 'a mention in a thread is answered in that thread',
    applies: (c) => c.groups && c.threads,
    async run(d) {
      const asked = await d.post('team', 'inside the thread', { mention: true, thread: true });
      const reply = await waitForMessage(d, 'team', /inside the thread/);
      expect(asked.thread).toBeDefined();
      expect(reply.thread).toBe(asked.thread);
      await d.idle('team', { thread: true });
      expect(d.sent('team')).toHaveLength(1);
    },
  },
  {
    name: 'without a mention of the bot the group stays silent (also when someone else is mentioned)',
    applies: inGroups,
    async run(d) {
      await d.post('team', 'just chatting among ourselves');
      await d.post('team', 'what do you think?', { mentionOther: true });
      await sleep(QUIET_MS);
      expect(d.sent('team')).toHaveLength(0);
      expect(d.model.requests).toHaveLength(0);
    },
  },
  {
    name: 'an @everyone or role mention is not a mention of the bot: silence',
    applies: (c) => c.groups && c.mentionEveryone,
    async run(d) {
      await d.post('team', 'meeting at noon', { mentionEveryone: true });
      await sleep(QUIET_MS);
      expect(d.sent('team')).toHaveLength(0);
      expect(d.model.requests).toHaveLength(0);
    },
  },
  {
    name: 'a group no persona owns stays silent, even when the bot is mentioned',
    applies: inGroups,
    async run(d) {
      await d.post('unlisted', 'hi there', { mention: true });
      await sleep(QUIET_MS);
      expect(d.sent('unlisted')).toHaveLength(0);
      expect(d.model.requests).toHaveLength(0);
    },
  },
  {
    name: 'a reply to one of the bot\'s messages in the group is answered without a mention',
    applies: inGroups,
    async run(d) {
      await d.post('team', 'first question', { mention: true });
      const first = await waitForMessage(d, 'team', /first question/);
      await d.idle('team');
      const followUp = await d.post('team', 'and a follow-up', { replyTo: first });
      const reply = await waitForMessage(d, 'team', /and a follow-up/);
      if (d.capabilities.replyReferences) expect(reply.replyTo).toBe(followUp.id);
      await d.idle('team');
      expect(d.sent('team')).toHaveLength(2);
      expect(d.model.requests).toHaveLength(2);
    },
  },
  {
    name: '/status in a group is shown to the sender alone where the platform can, else it answers their message',
    applies: (c) => c.groups && c.otherPeople,
    async run(d) {
      const asked = await d.post('team', '/status', { mention: true, from: 'helper' });
      const status = await waitForMessage(d, 'team', /^Persona: /);
      if (d.capabilities.privateReplies) expect(status.visibleTo).toBe('helper');
      else {
        expect(status.visibleTo).toBeUndefined();
        if (d.capabilities.replyReferences) expect(status.replyTo).toBe(asked.id);
      }
      await d.idle('team');
      expect(d.sent('team')).toHaveLength(1);
      expect(d.model.requests).toHaveLength(0);
    },
  },
  {
    name: 'a 10,000-character answer arrives whole, in parts under the platform limit, in order',
    async run(d) {
      const long = Array.from({ length: 100 }, (_, i) => `Paragraph ${String(i).padStart(3, '0')}: ${'lorem ipsum '.repeat(7).trim()}.`).join('\n\n');
      expect(long.length).toBeGreaterThan(10_000);
      d.model.script({ text: long });
      await d.dm('owner', 'write a lot');
      await until(() => squeeze(d.sent('dm:owner').map((m) => m.text).join(' ')).length >= squeeze(long).length, () => `the whole answer${describeSent(d, 'dm:owner')}`);
      await d.idle('dm:owner');
      await sleep(QUIET_MS);
      const parts = d.sent('dm:owner');
      for (const part of parts) expect(part.text.length).toBeLessThanOrEqual(d.capabilities.maxTextLength);
      expect(parts.length).toBeGreaterThanOrEqual(Math.ceil(long.length / d.capabilities.maxTextLength));
      expect(squeeze(parts.map((p) => p.text).join('\n'))).toBe(squeeze(long));
    },
  },
  ...[false, true].map((applied): Scenario => ({
    name: applied
      ? 'a long answer whose second part the platform made but whose answer was lost arrives whole, each part once'
      : 'a long answer whose second part fails to go out arrives whole, each part once',
    applies: (c) => c.failingPosts && (!applied || c.idempotentPosts),
    async run(d) {
      const long = Array.from({ length: 60 }, (_, i) => `Paragraph ${String(i).padStart(3, '0')}: ${'lorem ipsum '.repeat(7).trim()}.`).join('\n\n');
      expect(long.length).toBeGreaterThan(d.capabilities.maxTextLength);
      d.model.script({ text: long });
      d.failPost({ after: 1, applied });
      await d.dm('owner', 'write a lot');
      await until(() => squeeze(d.sent('dm:owner').map((m) => m.text).join(' ')).length >= squeeze(long).length, () => `the whole answer${describeSent(d, 'dm:owner')}`);
      await d.idle('dm:owner');
      await sleep(QUIET_MS);
      // Each part once, in order: nothing left out after the failure, and nothing that went out sent again.
      expect(squeeze(d.sent('dm:owner').map((p) => p.text).join('\n'))).toBe(squeeze(long));
    },
  })),
  {
    name: 'markup the platform rejects is sent again as plain text, once, with nothing leaked',
    applies: (c) => c.markup,
    async run(d) {
      d.model.script({ text: '**Bold** words and `some code`' });
      d.rejectNextMarkup();
      await d.dm('owner', 'format something');
      const reply = await waitForMessage(d, 'dm:owner', /Bold/);
      await d.idle('dm:owner');
      await sleep(QUIET_MS);
      expect(d.sent('dm:owner')).toHaveLength(1);
      expect(reply.formatted).toBe(false);
      expect(reply.text).toContain('some code');
      expect(reply.text).not.toMatch(/<\/?[a-z]+>/);
    },
  },
  {
    name: 'an event delivered twice is answered once',
    async run(d) {
      const message = await d.dm('owner', 'only once please');
      await waitForMessage(d, 'dm:owner', /only once please/);
      await d.idle('dm:owner');
      await d.redeliver(message);
      await sleep(QUIET_MS);
      await d.idle('dm:owner');
      expect(d.sent('dm:owner').map((m) => m.text)).toEqual(['echo: only once please']);
      expect(d.model.requests).toHaveLength(1);
    },
  },
  {
    name: 'an approval offers Allow once / Always allow / Deny; Allow once runs the tool and the outcome replaces the choices',
    async run(d) {
      scriptRecordStep(d, 'alpha');
      await d.dm('owner', 'record alpha');
      const question = await waitForQuestion(d);
      expect(question.choices).toEqual(['Allow once', 'Always allow', 'Deny']);
      expect(question.text).toContain('record_step');
      expect(question.text).toContain('alpha');
      await choose(d, question, 'Allow once');
      const reply = await waitForMessage(d, 'dm:owner', /^result: /);
      expect(reply.text).toBe('result: recorded alpha');
      expect(d.tools.runs).toEqual(['alpha']);
      const closed = await waitForEdit(d, 'dm:owner', question, /Allowed once/);
      expect(closed.choices).toEqual([]);
    },
  },
  {
    name: 'Deny: the tool does not run, and the model is told it was denied',
    async run(d) {
      scriptRecordStep(d, 'beta');
      await d.dm('owner', 'record beta');
      const question = await waitForQuestion(d);
      await choose(d, question, 'Deny');
      const reply = await waitForMessage(d, 'dm:owner', /^result: /);
      expect(reply.text).toMatch(/^result: denied: record_step did not run \(denied by .+\)/);
      expect(d.tools.runs).toEqual([]);
      const closed = await waitForEdit(d, 'dm:owner', question, /Denied/);
      expect(closed.choices).toEqual([]);
    },
  },
  {
    name: "a non-approver's click changes nothing, and only they are told it is not theirs",
    applies: (c) => c.buttons && c.otherPeople,
    async run(d) {
      scriptRecordStep(d, 'gamma');
      await d.dm('owner', 'record gamma');
      const question = await waitForQuestion(d);
      const ack = await d.click(question, 'Allow once', 'helper');
      expect(ack.notice).toBe('This is not yours to approve.');
      expect(ack.private).toBe(true);
      await sleep(QUIET_MS);
      expect(d.tools.runs).toEqual([]);
      expect(current(d, 'dm:owner', question).choices).toEqual(['Allow once', 'Always allow', 'Deny']);
      expect(d.sent('dm:owner').filter((m) => /^result: /.test(m.text))).toHaveLength(0);
      expect(d.sent('dm:helper')).toHaveLength(0);
      // The owner's answer still counts.
      await d.click(question, 'Deny');
      await waitForMessage(d, 'dm:owner', /^result: denied/);
    },
  },
  {
    name: 'every click is acknowledged within the platform deadline while the turn is still running',
    applies: (c) => c.buttons,
    async run(d) {
      // After the approval the turn keeps working for a while: the clicks must not wait for it.
      scriptRecordStep(d, 'delta', { delayMs: 1500 });
      await d.dm('owner', 'record delta');
      const question = await waitForQuestion(d);
      const clicks = [];
      if (d.capabilities.otherPeople) clicks.push(await d.click(question, 'Deny', 'helper'));
      clicks.push(await d.click(question, 'Allow once'));
      const again = await d.click(question, 'Allow once');
      clicks.push(again);
      expect(again.notice).toMatch(/^Already answered/);
      // The turn has not answered yet: every acknowledgement came first.
      expect(d.sent('dm:owner').filter((m) => /^result: /.test(m.text))).toHaveLength(0);
      for (const click of clicks) expect(click.ms).toBeLessThan(d.capabilities.ackDeadlineMs);
      await waitForMessage(d, 'dm:owner', /^result: recorded delta$/);
      expect(d.tools.runs).toEqual(['delta']);
      expect(d.ackTimings().filter((t) => t.kind === 'click')).toHaveLength(clicks.length);
    },
  },
  {
    name: 'ask_user: picking a choice answers it, and the answer arrives as the next turn',
    async run(d) {
      d.model.script(
        { toolCalls: [{ name: 'ask_user', arguments: { question: 'Deploy now?', choices: ['Yes', 'Later'] } }] },
        (req) => ({ text: `got: ${req.lastUserText}` }),
      );
      await d.dm('owner', 'should we deploy?');
      const question = await waitForQuestion(d);
      expect(question.text).toContain('Deploy now?');
      expect(question.choices).toEqual(['Yes', 'Later']);
      await choose(d, question, 'Later');
      const reply = await waitForMessage(d, 'dm:owner', /^got: /);
      expect(reply.text).toMatch(/^got: \[answer to Q#[\w-]+ "Deploy now\?" \(.+\)\]\nLater$/);
      // The asking turn ended with the question: one model call before the answer, one after.
      expect(d.model.requests).toHaveLength(2);
      const closed = await waitForEdit(d, 'dm:owner', question, /Later \(answered by .+\)/);
      expect(closed.choices).toEqual([]);
    },
  },
  {
    name: 'ask_user: a typed reply in the chat is its answer, not a new message',
    async run(d) {
      d.model.script({ toolCalls: [{ name: 'ask_user', arguments: { question: 'Which day suits you?' } }] }, (req) => ({ text: `got: ${req.lastUserText}` }));
      await d.dm('owner', 'plan the trip');
      const question = await waitForQuestion(d);
      await d.dm('owner', 'tomorrow please');
      const reply = await waitForMessage(d, 'dm:owner', /^got: /);
      expect(reply.text).toMatch(/^got: \[answer to Q#[\w-]+ "Which day suits you\?" \(via .+\)\]\ntomorrow please$/);
      expect(d.model.requests).toHaveLength(2);
      await waitForEdit(d, 'dm:owner', question, /tomorrow please \(answered by .+\)/);
      await d.idle('dm:owner');
      expect(d.sent('dm:owner').filter((m) => /^got: /.test(m.text))).toHaveLength(1);
    },
  },
  {
    name: 'a reminder is delivered once, to the chat that asked for it',
    timeoutMs: 20_000,
    async run(d) {
      const chat: ChatName = d.capabilities.groups ? 'team' : 'dm:owner';
      d.model.script({ toolCalls: [{ name: 'remind', arguments: { action: 'remind', prompt: 'Time to call Sam', in_seconds: 1 } }] }, { text: 'I will remind you.' });
      d.model.setDefault((req) =>
        req.lastUserText.startsWith('[reminder')
          ? { toolCalls: [{ name: 'reply_to_origin', arguments: { text: '⏰ Call Sam now.' } }, { name: 'end_task', arguments: { status: 'ok' } }] }
          : { text: `echo: ${req.lastUserText}` },
      );
      const ask = 'remind me in a second to call Sam';
      if (chat === 'team') await d.post('team', ask, { mention: true });
      else await d.dm('owner', ask);
      await waitForMessage(d, chat, /^I will remind you\.$/);
      await waitForMessage(d, chat, /^⏰ Call Sam now\.$/);
      await sleep(1500);
      expect(d.sent(chat).map((m) => m.text)).toEqual(['I will remind you.', '⏰ Call Sam now.']);
      for (const other of ['dm:owner', 'dm:helper', 'team'] as const) {
        if (other !== chat) expect(d.sent(other)).toHaveLength(0);
      }
    },
  },
  {
    name: 'a message that arrives mid-turn is read by the running turn before its next model call',
    async run(d) {
      const started = d.tools.nextSlowStart();
      d.model.script({ toolCalls: [{ name: 'slow_step', arguments: { ms: 800 } }] }, (req) => ({ text: `saw: ${req.lastUserText}` }));
      await d.dm('owner', 'first message');
      await started;
      await d.dm('owner', 'oh, and a correction');
      await waitForMessage(d, 'dm:owner', /^saw: /);
      await d.idle('dm:owner');
      expect(d.sent('dm:owner').map((m) => m.text)).toEqual(['saw: oh, and a correction']);
      expect(d.model.requests).toHaveLength(2);
      const contents = d.model.requests[1].body.messages.map((m: { content: unknown }) => m.content);
      expect(contents).toContain('first message');
      expect(contents).toContain('oh, and a correction');
    },
  },
  {
    name: '/stop mid-turn stops the running turn at once, and it never answers',
    async run(d) {
      const started = d.tools.nextSlowStart();
      d.model.script({ toolCalls: [{ name: 'slow_step', arguments: { ms: 20_000 } }] }, { text: 'the slow answer' });
      await d.dm('owner', 'do the long thing');
      await started;
      const stopped = Date.now();
      await d.dm('owner', '/stop');
      await waitForMessage(d, 'dm:owner', /^Stopped\.$/);
      await d.idle('dm:owner');
      expect(Date.now() - stopped).toBeLessThan(3000);
      await sleep(QUIET_MS);
      expect(d.sent('dm:owner').map((m) => m.text)).toEqual(['Stopped.']);
      expect(d.model.requests).toHaveLength(1);
    },
  },
  {
    name: 'three background tasks, one failing: an answer at once, then one message with all three results, in the same chat',
    timeoutMs: 30_000,
    async run(d) {
      d.model.setDefault((req) => {
        if (req.system.startsWith('You are a background task')) {
          return req.lastUserText.includes('gamma') ? { status: 500, text: 'the model is down' } : { text: `found ${req.lastUserText.split(' ').at(-1)}` };
        }
        if (req.lastUserText.startsWith('[subagent result')) return { text: `Results:\n${req.lastUserText}` };
        const last = (req.body.messages as { role: string }[]).at(-1)!;
        return last.role === 'tool'
          ? { text: 'Working on it.' }
          : { toolCalls: ['alpha', 'beta', 'gamma'].map((x) => ({ name: 'spawn_subagent', arguments: { task: `research ${x}`, label: x } })) };
      });
      await d.dm('owner', 'compare alpha, beta and gamma');
      await waitForMessage(d, 'dm:owner', /^Working on it\.$/);
      const results = await waitForMessage(d, 'dm:owner', /^Results:/, 25_000);
      expect(results.text).toMatch(/"alpha": ok\s+found alpha/);
      expect(results.text).toMatch(/"beta": ok\s+found beta/);
      expect(results.text).toMatch(/"gamma": failed/);
      await d.idle('dm:owner');
      await sleep(QUIET_MS);
      expect(d.sent('dm:owner').map((m) => m.text.split('\n')[0])).toEqual(['Working on it.', 'Results:']);
      expect(d.model.requests.filter((r) => r.lastUserText.startsWith('[subagent result'))).toHaveLength(1);
    },
  },
  {
    name: 'a streamed answer grows in one message and ends equal to the final text, never sent twice',
    async run(d) {
      d.setStreaming(true);
      const answer = Array.from({ length: 40 }, (_, i) => `word${i}`).join(' ');
      // 40 chunks over 2 s.
      d.model.script({ text: answer, chunks: 40, chunkDelayMs: 50 });
      const asked = Date.now();
      await d.dm('owner', 'tell me slowly');
      const first = await until(() => d.sent('dm:owner')[0], () => `the draft${describeSent(d, 'dm:owner')}`);
      // The draft shows before the model is done (the stream takes 2 s).
      expect(Date.now() - asked).toBeLessThan(1900);
      await waitForEdit(d, 'dm:owner', first, /word39$/);
      await d.idle('dm:owner');
      await sleep(QUIET_MS);
      const sent = d.sent('dm:owner');
      expect(sent.map((m) => m.text)).toEqual([answer]);
      expect(sent[0].revisions).toBeGreaterThan(1);
      expect(d.model.requests).toHaveLength(1);
      expect(d.model.requests[0].stream).toBe(true);
    },
  },
];

/** Registers every scenario that applies to the driver's platform, with one app for all of them. */
export function registerScenarios(driver: PlatformDriver) {
  describe(`${driver.name} conformance`, () => {
    beforeAll(() => driver.start(), 120_000);
    afterAll(() => driver.stop(), 60_000);
    beforeEach(() => driver.reset(), 30_000);
    for (const scenario of SCENARIOS) {
      if (scenario.applies && !scenario.applies(driver.capabilities)) continue;
      it(
        scenario.name,
        async () => {
          await scenario.run(driver);
          // Whatever the scenario did, no event waited past the platform's deadline for its acknowledgement.
          for (const timing of driver.ackTimings()) expect(timing.ms, `a ${timing.kind} acknowledged after ${timing.ms} ms`).toBeLessThan(driver.capabilities.ackDeadlineMs);
        },
        scenario.timeoutMs ?? 15_000,
      );
    }
  });
}
