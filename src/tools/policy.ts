import path from 'node:path';
import { closest } from 'fastest-levenshtein';
import type { Persona } from '#src/config/persona.ts';
import { ConfigError } from '#src/config/errors.ts';

/**
 * Every name in a persona's `approve` and `deny` lists must be a tool: a typo (`"shell-exec"`) would otherwise turn
 * "ask first" into "run without asking". Throws a ConfigError naming the file, the JSON path and the nearest tool.
 * Run whenever the set of tools is known or changes.
 */
export function checkToolPolicies(personas: readonly Persona[], toolNames: readonly string[]): void {
  const known = new Set(toolNames);
  for (const persona of personas) {
    for (const list of ['approve', 'deny'] as const) {
      persona.tools[list].forEach((name, i) => {
        if (known.has(name)) return;
        const nearest = toolNames.length ? closest(name, [...toolNames]) : undefined;
        throw new ConfigError(
          `${path.join(persona.dir, 'tools.jsonc')}: /${list}/${i} "${name}" is not a tool` +
            `${nearest ? ` (did you mean "${nearest}"?)` : ''}; the tools are ${[...toolNames].sort().join(', ')}`,
        );
      });
    }
  }
}
