import { describe, expect, it } from 'vitest';
import { summarizeArgs } from '#src/questions/summary.ts';

describe('summarizeArgs', () => {
  it('says so when there are no arguments', () => {
    expect(summarizeArgs(undefined)).toBe('(no arguments)');
    expect(summarizeArgs(null)).toBe('(no arguments)');
    expect(summarizeArgs({})).toBe('(no arguments)');
  });

  it('writes one line per argument, strings quoted, other values as JSON', () => {
    expect(summarizeArgs({ command: 'ls -la /tmp', count: 3, force: true, nothing: null, tags: ['a', 'b'], opts: { deep: 1 } })).toBe(
      ['command: "ls -la /tmp"', 'count: 3', 'force: true', 'nothing: null', 'tags: ["a","b"]', 'opts: {"deep":1}'].join('\n'),
    );
    expect(summarizeArgs({ empty: '' })).toBe('empty: ""');
  });

  it('cuts long strings and says how long they were', () => {
    const long = 'x'.repeat(300);
    expect(summarizeArgs({ text: long })).toBe(`text: "${'x'.repeat(200)}…" (300 characters)`);
    expect(summarizeArgs({ text: 'abcdefghij' }, { maxValueChars: 4 })).toBe('text: "abcd…" (10 characters)');
    // Exactly at the limit: not cut.
    expect(summarizeArgs({ text: 'abcd' }, { maxValueChars: 4 })).toBe('text: "abcd"');
  });

  it('cuts long arrays with an item count, and long objects with an ellipsis', () => {
    const items = Array.from({ length: 100 }, (_, i) => i);
    const line = summarizeArgs({ items });
    expect(line).toBe(`items: ${JSON.stringify(items).slice(0, 200)}… (100 items)`);
    const obj = Object.fromEntries(Array.from({ length: 60 }, (_, i) => [`k${i}`, i]));
    const objLine = summarizeArgs({ obj });
    expect(objLine).toBe(`obj: ${JSON.stringify(obj).slice(0, 200)}…`);
  });

  it('flattens newlines, so each argument stays on one line', () => {
    expect(summarizeArgs({ script: 'echo one\n  echo two\r\necho three' })).toBe('script: "echo one ⏎ echo two ⏎ echo three"');
    const out = summarizeArgs({ a: 'line1\nline2', b: 'x\n\n\ny' });
    expect(out.split('\n')).toHaveLength(2);
    expect(out).toBe('a: "line1 ⏎ line2"\nb: "x ⏎ y"');
  });

  it('caps many arguments with "… and N more"', () => {
    const args = Object.fromEntries(Array.from({ length: 50 }, (_, i) => [`arg${String(i).padStart(2, '0')}`, 'v'.repeat(40)]));
    const out = summarizeArgs(args);
    const lines = out.split('\n');
    expect(lines.at(-1)).toMatch(/^… and \d+ more$/);
    const shown = lines.length - 1;
    expect(lines.at(-1)).toBe(`… and ${50 - shown} more`);
    expect(shown).toBeGreaterThan(0);
    // Every line shown is complete, and the shown lines stay within the budget.
    expect(lines.slice(0, -1).join('\n').length).toBeLessThanOrEqual(700);
    expect(lines[0]).toBe(`arg00: "${'v'.repeat(40)}"`);

    expect(summarizeArgs({ a: 'aaaa', b: 'bbbb', c: 'cccc' }, { maxChars: 20 })).toBe('a: "aaaa"\nb: "bbbb"\n… and 1 more');
  });

  it('summarizes non-object arguments as one clipped JSON line', () => {
    expect(summarizeArgs('hello')).toBe('"hello"');
    expect(summarizeArgs(42)).toBe('42');
    expect(summarizeArgs(false)).toBe('false');
    expect(summarizeArgs([1, 'two'])).toBe('[1,"two"]');
    expect(summarizeArgs('y'.repeat(500))).toBe(`"${'y'.repeat(199)}…`);
    expect(summarizeArgs([1, 2, 3], { maxValueChars: 3 })).toBe('[1,…');
  });
});
