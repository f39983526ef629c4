import type { ProcessRegistry } from '#src/tools/processes.ts';
import type { Tool } from '#src/tools/types.ts';

/** Cancels a background task or command, or all of the conversation's tasks. */
export function createTaskCancelTool(processes?: ProcessRegistry): Tool<{ handle: string }> {
  return {
    name: 'task_cancel',
    description:
      'Cancel a background task (subagent) by handle, or "all" of this conversation\'s tasks: a waiting one never starts, a running one stops at its next step. Its result arrives as cancelled.' +
      (processes ? ' A background command (bg_…) is stopped with everything it started.' : ''),
    parameters: {
      type: 'object',
      additionalProperties: false,
      required: ['handle'],
      properties: { handle: { type: 'string', pattern: processes ? '^((sub|bg)_[0-9a-f]+|all)$' : '^(sub_[0-9a-f]+|all)$' } },
    },
    available: ({ persona }) => persona.tools.subagents.maxDepth > 0 || (processes !== undefined && persona.tools.processes.max > 0),
    timeoutMs: 15_000,
    async run(args, ctx) {
      if (processes && args.handle.startsWith('bg_')) return processes.cancel({ persona: ctx.persona.name, conversationId: ctx.conversationId }, args.handle);
      if (!ctx.subagents) return 'error: subagents are not available here';
      return ctx.subagents.cancel(args.handle);
    },
  };
}
