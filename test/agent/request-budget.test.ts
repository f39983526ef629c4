import { describe, expect, it } from 'vitest';
import { messageSize } from '../../src/agent/history.ts';
import { fitRequestToBudget, type TurnMessages } from '../../src/agent/request-budget.ts';
import type { ChatMessage } from '../../src/llm/types.ts';

const budget = { maxMessages: 80, maxChars: 10_000 };
const charsOf = (messages: ChatMessage[]) => messages.reduce((n, m) => n + messageSize(m), 0);
const user = (content: string): ChatMessage => ({ role: 'user', content });
let ids = 0;
/** One step: an assistant message calling `names`, then a result of `size` characters for each call. */
function step(size: number, ...names: string[]): ChatMessage[] {
  const calls = names.map((name) => ({ id: `c${++ids}`, name, arguments: '{}' }));
  return [{ role: 'assistant', content: '', toolCalls: calls }, ...calls.map((c): ChatMessage => ({ role: 'tool', toolCallId: c.id, name: c.name, content: 'r'.repeat(size) }))];
}
/** A turn that opened with `opening` after `history`, then added `rest`; `arrived` marks the mid-turn messages. */
function turn(history: ChatMessage[], opening: ChatMessage[], rest: ChatMessage[], arrived: ChatMessage[] = []): TurnMessages {
  return {
    messages: [...history, ...opening, ...rest],
    opening: { start: history.length, end: history.length + opening.length },
    inbox: new Set(arrived),
  };
}

describe('fitRequestToBudget', () => {
  it('sends a turn within the budget as it is', () => {
    const t = turn([user('before'), { role: 'assistant', content: 'ok' }], [user('now')], step(100, 'clock'));
    expect(fitRequestToBudget(t, budget)).toEqual(t.messages);
  });

  it('never leaves a tool call without its result, nor a result without its call', () => {
    const t = turn([user('h'.repeat(3_000)), ...step(3_000, 'a'), { role: 'assistant', content: 'x' }], [user('now')], [...step(3_000, 'b', 'c'), ...step(2_000, 'd', 'e')]);
    const sent = fitRequestToBudget(t, budget);
    expect(charsOf(sent)).toBeLessThanOrEqual(budget.maxChars);
    expect(sent.map((m) => (m.role === 'tool' ? `tool:${m.name}` : m.role))).toEqual(['user', 'assistant', 'tool:b', 'tool:c', 'assistant', 'tool:d', 'tool:e']);
    expect(sent.filter((m) => m.role === 'tool').map((m) => m.content.length)).toEqual([expect.any(Number), expect.any(Number), 2_000, 2_000]);
    expect(sent[2].content).toBe('[result of b omitted to fit the context: 3000 characters]');
  });

  it('cuts the newest results to a share each only when they alone exceed the budget', () => {
    const t = turn([], [user('read these')], step(32_000, 'read', 'read', 'read'));
    const sent = fitRequestToBudget(t, budget);
    expect(charsOf(sent)).toBeLessThanOrEqual(budget.maxChars);
    expect(sent[0]).toEqual(user('read these'));
    for (const result of sent.filter((m) => m.role === 'tool')) {
      expect(result.content).toMatch(/^r{3000,}\n\[… \d+ more characters cut to fit the context\]$/);
    }
  });

  it('shows no more arrived messages than the message budget, however short they are', () => {
    const arrived = Array.from({ length: 500 }, (_, i) => user(`m${i}`));
    const sent = fitRequestToBudget(turn([], [user('go')], [...step(10, 'wait'), ...arrived], arrived), budget);
    expect(sent[3]).toEqual(user('[Parlor] 420 more messages arrived while you were working; only the latest 80 are shown.'));
    expect(sent.slice(4)).toEqual(arrived.slice(-80));
  });

  it('shows the newest arrived message cut when it alone is longer than the room left', () => {
    const arrived = [user('short one'), user(`pasted ${'p'.repeat(50_000)}`)];
    const sent = fitRequestToBudget(turn([], [user('go')], [...step(10, 'wait'), ...arrived], arrived), budget);
    expect(charsOf(sent)).toBeLessThanOrEqual(budget.maxChars);
    expect(sent[3].content).toBe('[Parlor] 1 more message arrived while you were working; only the latest 1 is shown.');
    expect(sent[4].content).toMatch(/^pasted p+\n\[… \d+ more characters cut to fit the context\]$/);
  });

  it('keeps a share of the budget for arrived messages when the newest results alone would fill it', () => {
    const arrived = Array.from({ length: 10 }, (_, i) => user(`correction ${i} ${'c'.repeat(500)}`));
    const sent = fitRequestToBudget(turn([], [user('read these')], [...step(32_000, 'read', 'read', 'read'), ...arrived], arrived), budget);
    expect(charsOf(sent)).toBeLessThanOrEqual(budget.maxChars);
    expect(sent[5].content).toBe('[Parlor] 6 more messages arrived while you were working; only the latest 4 are shown.');
    expect(sent.slice(6)).toEqual(arrived.slice(-4));
    expect(sent.filter((m) => m.role === 'tool').every((m) => m.content.length > 2_000)).toBe(true);
  });

  it('keeps the opening of the turn and the notes the loop added', () => {
    const nudge = user('[Parlor] This is a background turn and plain text reaches no one. Call end_task now.');
    const t = turn([user('h'.repeat(5_000))], [user('[cron] check the feeds')], [...step(6_000, 'fetch'), ...step(6_000, 'fetch'), { role: 'assistant', content: 'all quiet' }, nudge]);
    const sent = fitRequestToBudget(t, budget);
    expect(charsOf(sent)).toBeLessThanOrEqual(budget.maxChars);
    expect(sent[0]).toEqual(user('[cron] check the feeds'));
    expect(sent.at(-1)).toEqual(nudge);
  });

  it('changes none of the stored messages', () => {
    const t = turn([user('h'.repeat(5_000))], [user('go')], [...step(6_000, 'a'), ...step(6_000, 'b')]);
    const before = structuredClone(t.messages);
    fitRequestToBudget(t, budget);
    expect(t.messages).toEqual(before);
  });
});
