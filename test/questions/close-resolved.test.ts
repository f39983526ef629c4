// A process about to stop shows how the conversation's questions ended now: one resolved a moment ago whose
// notification has not come yet would otherwise keep its buttons until the next process that runs the connector.
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { Tool } from '../../src/tools/types.ts';
import { startHarness, TEST_PERSONA, type Harness } from '../support/harness.ts';
import { createRecordingConnector, type RecordingConnector } from '../support/recording-connector.ts';
import { until } from '../support/until.ts';

let h: Harness;
let chat: RecordingConnector;

const guarded: Tool<Record<string, never>> = {
  name: 'guarded',
  description: 'needs an approval',
  parameters: { type: 'object', additionalProperties: false, properties: {} },
  approval: { summary: () => 'run guarded' },
  async run() {
    return 'ran';
  },
};

beforeAll(async () => {
  chat = createRecordingConnector('chat', { buttons: true });
  h = await startHarness({
    personas: {
      testy: { ...TEST_PERSONA, connectors: { ...(TEST_PERSONA.connectors as object), approvers: ['chat:u1'] }, tools: { approve: ['guarded'] } },
    },
    // No sweep comes back to it during the test.
    app: { connectors: () => [chat], tools: [guarded], questionSweepMs: 10 * 60_000 },
  });
});
afterAll(() => h?.stop());

it("updates the message of a question resolved without its notification, and waits for it", async () => {
  h.fake.script({ toolCalls: [{ name: 'guarded', arguments: {} }] }, { text: 'done' });
  await chat.inject({ text: 'go' });
  await until(() => chat.sent.some((m) => m.buttons?.length), 'the approval shown');
  // Resolved by another process's statement, its notification not heard here (yet).
  const [question] = await h.query<{ id: string }>(sql`update questions set status = 'expired' where status = 'pending' returning id`);
  await new Promise((r) => setTimeout(r, 300));
  expect(chat.edits).toHaveLength(0);
  await h.app.questions.closeResolved('testy:chat:u1');
  expect(chat.edits.map((e) => e.text).join('\n')).toMatch(/Expired/);
  const [row] = await h.query<{ closed: boolean }>(sql`select closed_at is not null as closed from questions where id = ${question.id}`);
  expect(row.closed).toBe(true);
  await h.app.stopConversation('testy:chat:u1', 'the test is over');
}, 30_000);
