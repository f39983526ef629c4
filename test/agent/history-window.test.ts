import { describe, expect, it } from 'vitest';
import { KEEP, planWindow, STEP_AT, windowSteps, type StoredMessage } from '../../src/agent/history-window.ts';
import { messageSize, type HistoryBudget } from '../../src/agent/history.ts';

const budget: HistoryBudget = { maxMessages: 20, maxChars: 10_000 };

/** A conversation of `turns` exchanges: a user message and a reply, each `size` characters. */
function conversation(turns: number, size = 100): StoredMessage[] {
  return Array.from({ length: turns * 2 }, (_, i) => ({
    id: 1000 + i,
    message: i % 2 === 0 ? { role: 'user' as const, content: `u${i}`.padEnd(size, '.') } : { role: 'assistant' as const, content: `a${i}`.padEnd(size, '.') },
  }));
}

describe('the history window', () => {
  it('starts at the same message on every turn between two steps, and steps only when the kept part passes the budget', () => {
    const all = conversation(60);
    let anchor = 0;
    const starts: number[] = [];
    for (let turn = 1; turn <= 60; turn++) {
      // The summary lands at once: the next walk begins where it ends.
      const rows = all.slice(0, turn * 2).filter((r) => r.id > anchor);
      const plan = planWindow(rows, budget);
      starts.push(plan.rows[0].id);
      if (plan.summariseThrough) anchor = plan.summariseThrough;
    }
    const moves = starts.filter((s, i) => i > 0 && s !== starts[i - 1]).length;
    // 20 messages at most, 17 before a step (STEP_AT), 8 kept after it (KEEP): one step every 5 turns or so.
    expect(moves).toBeGreaterThanOrEqual(8);
    expect(moves).toBeLessThanOrEqual(12);
    // Never backwards, and every window begins with a user message.
    expect([...starts].sort((a, b) => a - b)).toEqual(starts);
    expect(starts.every((id) => (id - 1000) % 2 === 0)).toBe(true);
  });

  it('drops back to a fraction of the budget at once, not one exchange at a time', () => {
    const rows = conversation(30);
    const steps = windowSteps(rows, budget);
    expect(steps.length).toBeGreaterThan(1);
    const gaps = steps.slice(1).map((id, i) => id - steps[i]);
    for (const gap of gaps) expect(gap).toBeGreaterThanOrEqual(Math.floor(budget.maxMessages * (STEP_AT - KEEP)) - 1);
  });

  it('keeps showing from the stored summary while that fits, so the summary and the window change together', () => {
    // 18 messages: past STEP_AT (a step is found and its summary asked for) but within the budget.
    const rows = conversation(9);
    const plan = planWindow(rows, budget);
    expect(plan.summariseThrough).toBeDefined();
    expect(plan.rows).toHaveLength(18);
  });

  it('moves on without the summary when the window would no longer fit (the turn never waits)', () => {
    const rows = conversation(12);
    const plan = planWindow(rows, budget);
    expect(plan.rows.length).toBeLessThanOrEqual(budget.maxMessages);
    expect(plan.rows.reduce((n, r) => n + messageSize(r.message), 0)).toBeLessThanOrEqual(budget.maxChars);
    expect(plan.rows[0].id).toBe(plan.summariseThrough! + 1);
  });

  it('finds the same later steps from any earlier step, so where the summary ends does not shift the window', () => {
    const rows = conversation(50, 300);
    const steps = windowSteps(rows, budget);
    const fromSecond = windowSteps(rows.filter((r) => r.id > steps[1]), budget);
    expect(fromSecond).toEqual(steps.slice(2));
  });
});
