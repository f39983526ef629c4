// A background turn whose model answers in plain text says so in the log, so a user can see why nothing arrived.
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createBuiltinTools } from '../../tools/index.ts';
import { startHarness, TEST_PERSONA, type Harness } from '../support/harness.ts';
import { until } from '../support/until.ts';

let h: Harness;
const lines: Record<string, unknown>[] = [];

beforeAll(async () => {
  const log = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) });
  h = await startHarness({
    personas: { testy: { ...TEST_PERSONA, schedules: [{ name: 'hb', type: 'heartbeat', cron: '0 3 * * *', prompt: 'Look around' }] } },
    app: { log, tools: createBuiltinTools({ timezone: 'UTC' }) },
  });
});
afterAll(() => h?.stop());

describe('background turns that answer in plain text', () => {
  it('log at info the first line of the text and that it reached no one, and send nothing', async () => {
    h.fake.setDefault(() => ({ text: 'All quiet on the server.\nNothing else to add.' }));
    await h.app.scheduler.forTurn({ persona: h.app.personas[0], conversationId: 'testy:test' }).runNow('hb');
    const logged = await until(() => lines.find((l) => String(l.msg).startsWith('a heartbeat turn answered in plain text')), 'the log line');
    expect(logged).toMatchObject({ level: 30, text: 'All quiet on the server.', conversation: 'testy:heartbeat' });
    expect(logged.msg).toBe('a heartbeat turn answered in plain text, which reaches no one; only send_message and reply_to_origin speak');
    await h.app.waitForIdle('testy:heartbeat');
    expect(h.chat.sent).toHaveLength(0);
  });
});
