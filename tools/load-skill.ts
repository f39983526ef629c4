import fs from 'node:fs/promises';
import type { Tool } from '#src/tools/types.ts';

interface Args {
  name: string;
}

/** A skill's instructions, at most (a longer SKILL.md is cut, and says so). */
const BODY_MAX_CHARS = 40_000;
const FRONT_MATTER = /^\uFEFF?---[ \t]*\r?\n[\s\S]*?\r?\n---[ \t]*(?:\r?\n|$)/;

/** The SKILL.md body without its front matter (name, description). */
export function skillBody(text: string): string {
  return text.replace(FRONT_MATTER, '').trim();
}

/** The instructions of one of the persona's skills (`skills/<name>/SKILL.md`); the prompt lists only their names. */
export function createLoadSkillTool(): Tool<Args> {
  return {
    name: 'load_skill',
    description: 'Load the instructions of one of your skills (listed under Skills in your instructions) by its name, before doing a task it covers.',
    parameters: {
      type: 'object',
      additionalProperties: false,
      required: ['name'],
      properties: { name: { type: 'string', minLength: 1, maxLength: 100 } },
    },
    available: ({ persona }) => persona.skills.length > 0,
    timeoutMs: 5000,
    async run(args, ctx) {
      const skills = ctx.persona.skills;
      const skill = skills.find((s) => s.name === args.name.trim()) ?? skills.find((s) => s.name.toLowerCase() === args.name.trim().toLowerCase());
      if (!skill) {
        const known = skills.map((s) => s.name).join(', ');
        return `error: there is no skill "${args.name}"; ${known ? `your skills are: ${known}` : 'you have no skills'}`;
      }
      let text: string;
      try {
        text = await fs.readFile(skill.file, 'utf8');
      } catch (err) {
        return `error: the skill "${skill.name}" could not be read (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`;
      }
      const body = skillBody(text);
      if (!body) return `the skill "${skill.name}" has no instructions beyond its description: ${skill.description}`;
      return body.length > BODY_MAX_CHARS ? `${body.slice(0, BODY_MAX_CHARS)}\n… (cut at ${BODY_MAX_CHARS} characters)` : body;
    },
  };
}
