// Skills: the prompt lists their names and descriptions only, and load_skill gives the body of SKILL.md.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { buildSystemPrompt } from '../../src/agent/prompt.ts';
import { loadPersona } from '../../src/config/persona.ts';
import { createLoadSkillTool } from '../../tools/load-skill.ts';
import { makeToolContext } from '../support/persona.ts';

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'parlor-skills-'));
const dir = path.join(root, 'skilled');
const write = (rel: string, text: string) => {
  fs.mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true });
  fs.writeFileSync(path.join(dir, rel), text);
};
write('SOUL.md', 'You are Skilled.');
write('skills/weather/SKILL.md', '---\nname: weather\ndescription: Look up the forecast\n---\n# Weather\n\nCall the forecast API with the city name.\n');
write('skills/notes/SKILL.md', '# Notes\nKeep tidy notes.\n');
const persona = loadPersona(dir);
const tool = createLoadSkillTool();
afterAll(() => fs.rmSync(root, { recursive: true, force: true }));

describe('load_skill', () => {
  it('returns the body of SKILL.md without its front matter', async () => {
    expect(await tool.run({ name: 'weather' }, makeToolContext({ persona }))).toBe('# Weather\n\nCall the forecast API with the city name.');
    expect(await tool.run({ name: 'notes' }, makeToolContext({ persona }))).toBe('# Notes\nKeep tidy notes.');
  });

  it('names the skills there are when asked for another', async () => {
    const result = (await tool.run({ name: 'cooking' }, makeToolContext({ persona }))) as string;
    expect(result).toMatch(/^error: there is no skill "cooking"; your skills are: /);
    expect(result.split('your skills are: ')[1].split(', ').sort()).toEqual(['notes', 'weather']);
  });

  it('is offered only to a persona with skills', () => {
    expect(tool.available!({ persona, kind: 'user' })).toBe(true);
    expect(tool.available!({ persona: { ...persona, skills: [] }, kind: 'user' })).toBe(false);
  });

  it('the prompt lists only names and descriptions, and says to call load_skill', () => {
    const prompt = buildSystemPrompt({ persona, kind: 'user', conversationId: 'skilled:chat:u1', timezone: 'UTC', toolNames: ['load_skill'] });
    // The section ends where the date comes, after everything that stays the same all day.
    const skills = prompt.slice(prompt.indexOf('## Skills'), prompt.indexOf('\n\n## Now'));
    expect(skills.split('\n').sort()).toEqual(
      ['## Skills', 'When a task matches a skill, call load_skill with its name and follow what it says:', '- notes: # Notes', '- weather: Look up the forecast'].sort(),
    );
    expect(prompt).not.toContain('forecast API');
    expect(prompt).not.toContain('SKILL.md');
  });
});
