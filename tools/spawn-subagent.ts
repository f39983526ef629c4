import type { Tool } from '#src/tools/types.ts';

interface Args {
  task: string;
  tools?: string[];
  label?: string;
}

/** Starts a background task with a fresh context; its result comes back to this conversation when it ends. */
export function createSpawnSubagentTool(): Tool<Args> {
  return {
    name: 'spawn_subagent',
    description:
      'Start a background task (a subagent) that works on its own while you go on or finish: it gets only the task text ' +
      '(no chat history), your tools except those that talk to people, and reports back. Write the task so it stands ' +
      'alone. Start several for independent parts of a job. Their results arrive together as a message in this ' +
      'conversation when they end; then answer the person. tools narrows what it may use; label names it in task_status.',
    parameters: {
      type: 'object',
      additionalProperties: false,
      required: ['task'],
      properties: {
        task: { type: 'string', minLength: 1, maxLength: 20_000 },
        tools: { type: 'array', items: { type: 'string', minLength: 1 }, uniqueItems: true, maxItems: 50 },
        label: { type: 'string', minLength: 1, maxLength: 80 },
      },
    },
    available: ({ persona }) => persona.tools.subagents.maxDepth > 0,
    timeoutMs: 15_000,
    async run(args, ctx) {
      if (!ctx.subagents) return 'error: subagents are not available here';
      const started = await ctx.subagents.spawn(args);
      if ('error' in started) return `refused: ${started.error}`;
      return `started ${started.handle}${args.label ? ` "${args.label}"` : ''}${started.queued ? ' (waiting for a free place; it starts when another task ends)' : ''}. Its result arrives as a message in this conversation when it ends; you need not wait for it.`;
    },
  };
}
