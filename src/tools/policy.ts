import path from 'node:path';
import { closest } from 'fastest-levenshtein';
import type { Persona } from '#src/config/persona.ts';
import { ConfigError } from '#src/config/errors.ts';
import { needsApproval } from './runner.ts';
import type { Tool } from './types.ts';

/**
 * Every name in a persona's `approve`, `deny` and `allow` lists must be a tool: a typo (`"shell-exec"`) would otherwise turn
 * "ask first" into "run without asking". Throws a ConfigError naming the file, the JSON path and the nearest tool.
 * Run whenever the set of tools is known or changes.
 */
export function checkToolPolicies(personas: readonly Persona[], toolNames: readonly string[]): void {
  const known = new Set(toolNames);
  for (const persona of personas) {
    for (const list of ['approve', 'deny', 'allow'] as const) {
      persona.tools[list].forEach((name, i) => {
        if (known.has(name)) return;
        const nearest = toolNames.length ? closest(name, [...toolNames]) : undefined;
        throw new ConfigError(
          `${path.join(persona.dir, 'tools.jsonc')}: /${list}/${i} "${name}" is not a tool` +
            `${nearest ? ` (did you mean "${nearest}"?)` : ''}; the tools are ${[...toolNames].sort().join(', ')}`,
        );
      });
    }
    const both = persona.tools.approve.find((name) => persona.tools.allow.includes(name));
    if (both) {
      throw new ConfigError(
        `${path.join(persona.dir, 'tools.jsonc')}: /allow/${persona.tools.allow.indexOf(both)} "${both}" is also under "approve"; keep it in one of them`,
      );
    }
  }
}

/** What each persona runs without asking although it acts on the machine or the world (`allow` in tools.jsonc). */
export function unapprovedActions(personas: readonly Persona[], tools: readonly Pick<Tool, 'name' | 'approval'>[]): string[] {
  return personas.flatMap((persona) =>
    tools
      .filter((t) => t.approval?.byDefault && !needsApproval(t, persona))
      .map((t) => `persona ${persona.name} runs ${t.name} without asking (it is under "allow" in ${path.join(persona.dir, 'tools.jsonc')})`),
  );
}
