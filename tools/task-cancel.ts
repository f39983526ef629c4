import type { Tool } from '#src/tools/types.ts';

/** Cancels a background task, or all of the conversation's. */
export function createTaskCancelTool(): Tool<{ handle: string }> {
  return {
    name: 'task_cancel',
    description: 'Cancel a background task (subagent) by handle, or "all" of this conversation\'s: a waiting one never starts, a running one stops at its next step. Its result arrives as cancelled.',
    parameters: {
      type: 'object',
      additionalProperties: false,
      required: ['handle'],
      properties: { handle: { type: 'string', pattern: '^(sub_[0-9a-f]+|all)$' } },
    },
    available: ({ persona }) => persona.tools.subagents.maxDepth > 0,
    timeoutMs: 15_000,
    async run(args, ctx) {
      if (!ctx.subagents) return 'error: subagents are not available here';
      return ctx.subagents.cancel(args.handle);
    },
  };
}
