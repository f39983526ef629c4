import { describe, expect, it } from 'vitest';
import { buildSystemPrompt, MORE_TOOLS_PROMPT_MAX_CHARS } from '../../src/agent/prompt.ts';
import { makePersona } from '../support/persona.ts';

const base = { persona: makePersona(), kind: 'user' as const, conversationId: 'tester:chat:u1', timezone: 'UTC', now: new Date('2026-12-01T12:00:00Z') };

describe('the system prompt', () => {
  it('says where the files are when the file tools are offered', () => {
    expect(buildSystemPrompt({ ...base, toolNames: ['file_read', 'shell_exec'] })).toContain(
      '- Your files are in your workspace: file tools and shell commands take paths relative to it, and files people send are saved under uploads/.',
    );
  });

  it('says nothing of files to a persona without them', () => {
    expect(buildSystemPrompt({ ...base, toolNames: ['clock'] })).not.toContain('workspace');
  });
});

describe('the system prompt across the turns of a day', () => {
  const at = (iso: string, toolNames = ['clock']) => buildSystemPrompt({ ...base, toolNames, timezone: 'Europe/Paris', now: new Date(iso) });

  it('is byte-identical for two turns a minute apart on the same day, so the provider can reuse its cache', () => {
    expect(at('2026-12-01T12:00:00Z')).toBe(at('2026-12-01T12:01:00Z'));
    expect(at('2026-12-01T06:10:00Z')).toBe(at('2026-12-01T21:40:00Z'));
  });

  it('still says the date, in the persona time zone, and where the exact time is', () => {
    // 23:30 UTC is already the next day in Paris.
    const prompt = at('2026-12-01T23:30:00Z');
    expect(prompt).toContain('- Today is Wednesday, 2 December 2026 (Europe/Paris). For the exact time, call clock.');
    expect(prompt).not.toBe(at('2026-12-01T22:30:00Z'));
  });

  it('turns the day at midnight in a time zone a quarter of an hour off the hour, whatever was said a moment before', () => {
    const kathmandu = (iso: string) => buildSystemPrompt({ ...base, toolNames: ['clock'], timezone: 'Asia/Kathmandu', now: new Date(iso) });
    // Kathmandu is 5:45 ahead of UTC: its midnight is at 18:15 UTC.
    expect(kathmandu('2026-12-01T18:14:59Z')).toContain('- Today is Tuesday, 1 December 2026 (Asia/Kathmandu).');
    expect(kathmandu('2026-12-01T18:15:00Z')).toContain('- Today is Wednesday, 2 December 2026 (Asia/Kathmandu).');
    expect(kathmandu('2026-12-01T18:14:59Z')).toContain('- Today is Tuesday, 1 December 2026 (Asia/Kathmandu).');
    // And another zone, or the same one without the clock tool, is not told Kathmandu's line.
    expect(at('2026-12-01T18:15:00Z')).toContain('- Today is Tuesday, 1 December 2026 (Europe/Paris).');
    expect(buildSystemPrompt({ ...base, toolNames: [], timezone: 'Asia/Kathmandu', now: new Date('2026-12-01T18:15:00Z') })).toContain(
      '- Today is Wednesday, 2 December 2026 (Asia/Kathmandu); the time is between 23:45 and 00:45.',
    );
  });

  it('gives the hour without the clock tool, the same for the whole hour', () => {
    const prompt = at('2026-12-01T12:05:00Z', []);
    expect(prompt).toContain('- Today is Tuesday, 1 December 2026 (Europe/Paris); the time is between 13:00 and 14:00.');
    expect(prompt).toBe(at('2026-12-01T12:59:00Z', []));
  });

  it('puts the date after the instructions and skills, and the user model last', () => {
    const persona = makePersona({ skills: [{ name: 'notes', description: 'Take notes', file: 'skills/notes/SKILL.md' }] });
    const prompt = buildSystemPrompt({
      ...base,
      persona,
      toolNames: ['clock', 'load_skill'],
      userModel: { user: 'chat:u1', entries: [{ dimension: 'diet', content: 'vegan', confidence: 0.9 } as never] },
    });
    const order = ['## This turn', '## Skills', '## Now', '## What you know of chat:u1'].map((h) => prompt.indexOf(h));
    expect(order.every((i) => i >= 0)).toBe(true);
    expect([...order].sort((a, b) => a - b)).toEqual(order);
  });
});

describe('the search-tier listing', () => {
  const many = (n: number) => Array.from({ length: n }, (_, i) => ({ name: `tool_${i}`, description: `Does thing ${i}. More detail that is not shown.` }));

  it('lists the tools by name and first sentence, before the date, and counts those it leaves out', () => {
    const prompt = buildSystemPrompt({ ...base, toolNames: ['clock', 'tool_activate'], moreTools: many(200) });
    expect(prompt).toContain('## More tools\ntool_activate makes one callable; tool_search shows parameters and finds more:');
    expect(prompt).toContain('- tool_0: Does thing 0.');
    expect(prompt).not.toContain('More detail');
    expect(prompt.indexOf('## More tools')).toBeLessThan(prompt.indexOf('## Now'));
    const section = prompt.slice(prompt.indexOf('## More tools'), prompt.indexOf('## Now'));
    expect(section.length).toBeLessThanOrEqual(MORE_TOOLS_PROMPT_MAX_CHARS + 2);
    expect(section).toMatch(/- \((\d+) more: tool_search finds them\)/);
    const shown = section.split('\n').filter((l) => l.startsWith('- tool_')).length;
    expect(Number(/\((\d+) more/.exec(section)![1]) + shown).toBe(200);
  });

  it('is in a task brief too, and absent when there is nothing to activate', () => {
    expect(buildSystemPrompt({ ...base, kind: 'task', toolNames: [], moreTools: many(2) })).toContain('- tool_1: Does thing 1.');
    expect(buildSystemPrompt({ ...base, toolNames: [], moreTools: [] })).not.toContain('## More tools');
  });
});
