import { describe, expect, it } from 'vitest';
import { fitWindow, repairToolPairs } from '../../src/agent/history.ts';
import type { ChatMessage } from '../../src/llm/types.ts';

const call = (id: string): ChatMessage => ({ role: 'assistant', content: '', toolCalls: [{ id, name: 'clock', arguments: '{}' }] });
const result = (id: string): ChatMessage => ({ role: 'tool', toolCallId: id, name: 'clock', content: 'noon' });

describe('repairToolPairs', () => {
  it('fills a tool call left without a result (the process died in between)', () => {
    const repaired = repairToolPairs([{ role: 'user', content: 'time?' }, call('a'), { role: 'user', content: 'hello again' }]);
    expect(repaired.map((m) => m.role)).toEqual(['user', 'assistant', 'tool', 'user']);
    expect(repaired[2]).toMatchObject({ toolCallId: 'a', content: expect.stringMatching(/^interrupted/) });
  });

  it('drops results whose call is not right before them, and keeps good pairs untouched', () => {
    const good: ChatMessage[] = [{ role: 'user', content: 'q' }, call('a'), result('a'), { role: 'assistant', content: 'noon' }];
    expect(repairToolPairs(good)).toEqual(good);
    expect(repairToolPairs([{ role: 'user', content: 'q' }, result('zzz'), { role: 'assistant', content: 'x' }]).map((m) => m.role)).toEqual(['user', 'assistant']);
  });
});

describe('fitWindow', () => {
  it('keeps the newest messages within the budget and starts at a user message', () => {
    const messages: ChatMessage[] = [
      { role: 'user', content: 'x'.repeat(100) },
      call('a'),
      result('a'),
      { role: 'assistant', content: 'y'.repeat(100) },
      { role: 'user', content: 'newest' },
    ];
    const window = fitWindow(messages, 150);
    expect(window[0]).toEqual({ role: 'user', content: 'newest' });
  });
});
