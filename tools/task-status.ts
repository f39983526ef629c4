import type { Tool } from '#src/tools/types.ts';

/** What the conversation's background tasks are doing (or one of them). */
export function createTaskStatusTool(): Tool<{ handle?: string }> {
  return {
    name: 'task_status',
    description: 'List the background tasks (subagents) started in this conversation, or one by handle: state, when it started, how long it ran, its steps and last tool.',
    parameters: {
      type: 'object',
      additionalProperties: false,
      properties: { handle: { type: 'string', pattern: '^sub_[0-9a-f]+$' } },
    },
    available: ({ persona }) => persona.tools.subagents.maxDepth > 0,
    timeoutMs: 10_000,
    async run(args, ctx) {
      if (!ctx.subagents) return 'error: subagents are not available here';
      return ctx.subagents.status(args.handle);
    },
  };
}
