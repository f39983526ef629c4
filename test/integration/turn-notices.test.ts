// When a stored message tells the other processes of its turn's job: only when this process does not start the turn
// at once. A turn it starts right behind the message's transaction needs no other process to look for it, and a
// notification would make each one with a free place fetch in vain.
import postgres from 'postgres';
import { afterAll, beforeAll, beforeEach, expect, it } from 'vitest';
import { CHANNELS, readTurnNotice } from '../../src/db/channels.ts';
import { sleep } from '../../src/retry.ts';
import { startHarness, TEST_PERSONA, type Harness } from '../support/harness.ts';
import { slowTool } from '../support/slow-tool.ts';
import { until } from '../support/until.ts';

let h: Harness;
let listener: postgres.Sql;
/** The conversations named by the turn notifications heard. */
const heard: string[] = [];
/** What the slow tool calls as it begins. */
const slow = { started: () => {} };

beforeAll(async () => {
  h = await startHarness({ personas: { testy: TEST_PERSONA }, app: { tools: [slowTool(slow)] } });
  // Another process's ear: what every process on the database hears.
  listener = postgres(h.db.url, { max: 1, onnotice: () => {} });
  await listener.listen(CHANNELS.turn, (payload) => heard.push(readTurnNotice(payload).conversationId));
});
afterAll(async () => {
  await listener?.end({ timeout: 1 });
  await h?.stop();
});
beforeEach(() => {
  h.fake.reset();
  h.chat.sent.length = 0;
  heard.length = 0;
});

const dm = (user: string, text: string) => h.chat.inject({ text, chat: { id: user, type: 'dm' }, sender: { id: user } });

it('a DM whose turn starts at once, in the process that stored it, tells no other process', async () => {
  h.fake.script({ text: 'hello' });
  await dm('u1', 'hi');
  expect((await h.chat.waitForSent(1))[0].text).toBe('hello');
  // A notification would have arrived by now (a commit's notifications go out with it).
  await sleep(300);
  expect(heard.filter((c) => c.endsWith(':u1'))).toEqual([]);
});

it("a DM that waits for its conversation's running turn is announced to every process", async () => {
  const started = new Promise<void>((resolve) => (slow.started = resolve));
  h.fake.script({ toolCalls: [{ name: 'slow_task', arguments: { ms: 800 } }] }, { text: 'done' }, { text: 'and the second' });
  await dm('u2', 'first');
  await started;
  await dm('u2', 'second');
  await until(() => heard.some((c) => c.endsWith(':u2')), 3000);
  await h.chat.waitForSent(1);
});
