// `parlor doctor --persona NAME`: the tools a persona's turns see, per kind of turn, as the turn computes them.
import type { Persona } from '#src/config/persona.ts';
import type { TurnKind } from '#src/turns.ts';
import type { ToolCatalog } from './catalog.ts';
import { needsApproval } from './runner.ts';

/** The kinds of turn shown, by the names people know them by (a task is what spawn_subagent starts). */
const CONTEXTS: readonly { label: string; kind: TurnKind }[] = [
  { label: 'user', kind: 'user' },
  { label: 'cron', kind: 'cron' },
  { label: 'heartbeat', kind: 'heartbeat' },
  { label: 'subagent', kind: 'task' },
];

/** One line per context with the callable tools (those that ask first marked), and one with the tools to activate. */
export async function turnToolsReport(catalog: ToolCatalog, persona: Persona): Promise<string[]> {
  const lines: string[] = [];
  for (const { label, kind } of CONTEXTS) {
    const turn = await catalog.forTurn({ persona, kind, ...(kind === 'task' ? { task: { depth: 1, tools: null } } : {}) });
    const callable = turn.callable().map((t) => (needsApproval(t, persona) ? `${t.name} (asks first)` : t.name));
    lines.push(`${label}: ${callable.length} tools: ${callable.join(', ')}`);
    const listed = turn.listed();
    if (listed.length) lines.push(`  and ${listed.length} to activate with tool_activate: ${listed.map((t) => t.name).join(', ')}`);
  }
  return lines;
}
