import { describe, expect, it } from 'vitest';
import pino from 'pino';
import { INTERRUPTED_RESULT, repairToolPairs } from '#src/agent/history.ts';
import { rerunInterruptedCalls } from '#src/agent/resume.ts';
import type { ChatMessage } from '#src/llm/types.ts';
import { ToolRunner } from '#src/tools/runner.ts';
import type { Tool } from '#src/tools/types.ts';
import { makePersona, makeToolContext } from '../support/persona.ts';

// A turn resumed after a crash ends on calls that never reported. A call its tool can run again to no effect is run
// again with the same call id; any other keeps the "interrupted" result (running it again could do it twice).
const runs: { tool: string; callKey?: string }[] = [];
const tool = (name: string, resumable?: Tool['resumable']): Tool => ({
  name,
  description: name,
  parameters: { type: 'object', properties: { action: { type: 'string' } } },
  ...(resumable ? { resumable } : {}),
  run: async (_args, ctx) => {
    runs.push({ tool: name, callKey: ctx.callKey });
    return `${name} done`;
  },
});
const keyed = tool('keyed', (args: { action?: string }) => args.action !== 'fire');
const plain = tool('plain');
const runner = new ToolRunner([keyed, plain]);

function historyOf(calls: { id: string; name: string; arguments: string }[], results: ChatMessage[] = []): ChatMessage[] {
  return repairToolPairs([{ role: 'user', content: 'do it' }, { role: 'assistant', content: '', toolCalls: calls }, ...results]);
}

describe('a resumed turn', () => {
  it('runs a resumable call again with its call id and stores the result; others stay interrupted', async () => {
    runs.length = 0;
    const history = historyOf([
      { id: 'c1', name: 'keyed', arguments: '{"action":"set"}' },
      { id: 'c2', name: 'plain', arguments: '{}' },
      { id: 'c3', name: 'keyed', arguments: '{"action":"fire"}' },
    ]);
    const stored: ChatMessage[] = [];
    const ctx = makeToolContext({ persona: makePersona({ tools: { approve: [] } }), kind: 'user' });
    await rerunInterruptedCalls(history, { tools: runner, offered: [keyed, plain], ctx, store: async (m) => void stored.push(m), log: pino({ level: 'silent' }) });
    expect(runs).toEqual([{ tool: 'keyed', callKey: expect.stringMatching(/^turn-test\/c1\/[\w-]{16}$/) }]);
    expect(stored).toEqual([{ role: 'tool', toolCallId: 'c1', name: 'keyed', content: 'keyed done' }]);
    expect(history.slice(2).map((m) => m.content)).toEqual(['keyed done', INTERRUPTED_RESULT, INTERRUPTED_RESULT]);
  });

  it('leaves a call that did report alone, and a turn that does not end on calls', async () => {
    runs.length = 0;
    const ctx = makeToolContext({ persona: makePersona({ tools: { approve: [] } }), kind: 'user' });
    const reported = historyOf([{ id: 'c1', name: 'keyed', arguments: '{}' }], [{ role: 'tool', toolCallId: 'c1', name: 'keyed', content: 'it was set' }]);
    const answered: ChatMessage[] = [...reported, { role: 'assistant', content: 'all set' }];
    for (const history of [reported, answered]) {
      await rerunInterruptedCalls(history, { tools: runner, offered: [keyed, plain], ctx, store: async () => {}, log: pino({ level: 'silent' }) });
    }
    expect(runs).toEqual([]);
  });
});
