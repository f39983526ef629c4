import path from 'node:path';
import { closest } from 'fastest-levenshtein';
import type { Persona } from '#src/config/persona.ts';
import { ConfigError } from '#src/config/errors.ts';
import { badGroupEntry } from './catalog.ts';
import { needsApproval } from './runner.ts';
import type { Tool } from './types.ts';

/**
 * Every entry of a persona's `approve`, `deny`, `allow` and `activate` lists must be a tool or a group: a typo
 * (`"shell-exec"`) would otherwise turn "ask first" into "run without asking". MCP tools (`mcp_<server>_<tool>`) are
 * taken on trust, as their servers may not have answered yet. Throws a ConfigError naming the file, the JSON path
 * and the nearest tool. Run whenever the set of tools is known or changes; `toolNames` may differ per persona (its
 * custom tools).
 */
export function checkToolPolicies(personas: readonly Persona[], toolNames: readonly string[] | ((persona: Persona) => readonly string[])): void {
  for (const persona of personas) {
    const names = typeof toolNames === 'function' ? toolNames(persona) : toolNames;
    const known = new Set(names);
    for (const list of ['approve', 'deny', 'allow', 'activate'] as const) {
      persona.tools[list].forEach((name, i) => {
        const where = `${path.join(persona.dir, 'tools.jsonc')}: /${list}/${i}`;
        const group = badGroupEntry(name);
        if (group) throw new ConfigError(`${where} ${group}`);
        if (known.has(name) || name.startsWith('group:') || name.startsWith('mcp_')) return;
        const nearest = names.length ? closest(name, [...names]) : undefined;
        throw new ConfigError(
          `${where} "${name}" is not a tool${nearest ? ` (did you mean "${nearest}"?)` : ''}; the tools are ${[...names].sort().join(', ')}`,
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
