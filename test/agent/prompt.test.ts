import { describe, expect, it } from 'vitest';
import { buildSystemPrompt } from '../../src/agent/prompt.ts';
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
