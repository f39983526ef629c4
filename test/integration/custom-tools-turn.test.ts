// A custom tool folder through real turns: listed in the prompt, activated, called with a hostile value that stays
// a value, and a folder added while Parlor runs is there on the next turn.
import fs from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { lastToolResult } from '../support/fake-llm.ts';
import { startHarness, TEST_PERSONA, type Harness } from '../support/harness.ts';

async function addTool(dir: string, folder: string, manifest: Record<string, unknown>): Promise<void> {
  await fs.mkdir(path.join(dir, folder), { recursive: true });
  await fs.writeFile(path.join(dir, folder, 'tool.json'), JSON.stringify(manifest));
}

describe('a custom tool in a turn', () => {
  let h: Harness;
  let toolsDir: string;
  beforeAll(async () => {
    // The persona runs commands without the sandbox here, so the test does not depend on bubblewrap.
    h = await startHarness({ personas: { testy: { ...TEST_PERSONA, tools: { shell: 'unsandboxed' } } } });
    toolsDir = path.join(h.personasDir, 'testy', 'tools');
    await addTool(toolsDir, 'greet', {
      name: 'greet',
      description: 'Greet someone by name. Prints a greeting.',
      parameters: { type: 'object', additionalProperties: false, required: ['who'], properties: { who: { type: 'string' } } },
      command: 'printf "hello %s" {{who}}',
    });
  });
  afterAll(() => h?.stop());
  beforeEach(() => {
    h.fake.reset();
    h.chat.sent.length = 0;
  });

  it('is listed, activated and called; a hostile value arrives as it was written and runs nothing', async () => {
    const hostile = "x'; touch pwned; echo $(id) `id` \"q\"";
    h.fake.script(
      { toolCalls: [{ name: 'tool_activate', arguments: { name: 'greet' } }] },
      { toolCalls: [{ name: 'greet', arguments: { who: hostile } }] },
      (req) => ({ text: lastToolResult(req) }),
    );
    await h.chat.inject({ text: 'greet them' });
    const [reply] = await h.chat.waitForSent(1);
    expect(h.fake.requests[0].system).toContain('- greet: Greet someone by name.');
    expect(h.fake.requests[0].toolNames).not.toContain('greet');
    expect(h.fake.requests[1].toolNames).toContain('greet');
    expect(reply.text).toBe(`hello ${hostile}`);
    await expect(fs.access(path.join(h.personasDir, 'testy', 'workspace', 'pwned'))).rejects.toThrow();
    await h.app.waitForIdle('testy:chat:u1');
  });

  it('a folder added while Parlor runs is offered on the next turn, and one removed is gone', async () => {
    await addTool(toolsDir, 'shout', {
      name: 'shout',
      description: 'Say it loudly.',
      parameters: { type: 'object', properties: { text: { type: 'string' } } },
      command: 'printf "%s!" {{text}}',
    });
    h.fake.script({ text: 'ok' });
    await h.chat.inject({ text: 'anything new?' });
    await h.chat.waitForSent(1);
    await h.app.waitForIdle('testy:chat:u1');
    expect(h.fake.requests[0].system).toContain('- shout: Say it loudly.');
    await fs.rm(path.join(toolsDir, 'shout'), { recursive: true });
    h.fake.reset();
    h.fake.script({ text: 'ok' });
    await h.chat.inject({ text: 'and now?' });
    await h.chat.waitForSent(2);
    await h.app.waitForIdle('testy:chat:u1');
    expect(h.fake.requests[0].system).not.toContain('- shout:');
    expect(h.fake.requests[0].system).toContain('- greet:');
  });
});
