import type { ProcessRegistry } from '#src/tools/processes.ts';
import type { Tool } from '#src/tools/types.ts';

/** What the conversation's background work is doing: its tasks (subagents) and its background commands, or one. */
export function createTaskStatusTool(processes?: ProcessRegistry): Tool<{ handle?: string }> {
  return {
    name: 'task_status',
    description:
      'List the background work of this conversation, or one item by handle: tasks (subagents, sub_…) with their state, when they started, how long they ran, their steps and last tool' +
      (processes ? '; and background commands (bg_…) with their state and exit status.' : '.'),
    parameters: {
      type: 'object',
      additionalProperties: false,
      properties: { handle: { type: 'string', pattern: processes ? '^(sub|bg)_[0-9a-f]+$' : '^sub_[0-9a-f]+$' } },
    },
    available: ({ persona }) => persona.tools.subagents.maxDepth > 0 || (processes !== undefined && persona.tools.processes.max > 0),
    timeoutMs: 10_000,
    async run(args, ctx) {
      const caller = { persona: ctx.persona.name, conversationId: ctx.conversationId };
      if (processes && args.handle?.startsWith('bg_')) return processes.status(caller, args.handle);
      if (args.handle) return ctx.subagents ? ctx.subagents.status(args.handle) : 'error: subagents are not available here';
      const parts = [ctx.subagents && ctx.persona.tools.subagents.maxDepth > 0 ? await ctx.subagents.status() : undefined];
      if (processes) parts.push(await processes.status(caller));
      return parts.filter(Boolean).join('\n') || 'error: subagents are not available here';
    },
  };
}
