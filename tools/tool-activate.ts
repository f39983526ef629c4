import type { Tool } from '#src/tools/types.ts';

interface Args {
  name: string;
}

/**
 * Makes a custom or MCP tool (the search tier) callable from the next step of this turn, and in this conversation's
 * later turns until /new.
 */
export function createToolActivateTool(): Tool<Args> {
  return {
    name: 'tool_activate',
    group: 'other',
    description: 'Make a tool of "More tools" callable from your next step on, in this conversation.',
    parameters: {
      type: 'object',
      additionalProperties: false,
      required: ['name'],
      properties: { name: { type: 'string', minLength: 1, maxLength: 100 } },
    },
    timeoutMs: 5000,
    async run(args, ctx) {
      if (!ctx.tiers?.count()) return 'error: you have no tools to activate (every tool you have is already callable)';
      const result = await ctx.tiers.activate(args.name.trim());
      if ('error' in result) return `error: ${result.error}`;
      if (result.already) return `${result.tool.name} is already active: call it`;
      const evicted = result.evicted ? ` (${result.evicted} is no longer active, to make room; activate it again when you need it)` : '';
      return `activated ${result.tool.name}: you can call it from your next step${evicted}. Its parameters: ${JSON.stringify(result.tool.parameters)}`;
    },
  };
}
