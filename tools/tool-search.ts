import type { Tool } from '#src/tools/types.ts';

interface Args {
  query: string;
  limit?: number;
}

const DEFAULT_LIMIT = 5;
const MAX_LIMIT = 10;
/** One tool's schema in the result, at most (a longer one is cut, and says so). */
const SCHEMA_MAX_CHARS = 4000;

/**
 * Finds custom and MCP tools (the search tier) by words of their name or description and returns their whole
 * schemas as text; it changes nothing. tool_activate makes one callable.
 */
export function createToolSearchTool(): Tool<Args> {
  return {
    name: 'tool_search',
    group: 'other',
    description: 'Find tools of "More tools" by what they do, with their parameters (then tool_activate one).',
    parameters: {
      type: 'object',
      additionalProperties: false,
      required: ['query'],
      properties: {
        query: { type: 'string', maxLength: 200, description: 'What the tool should do; empty lists some.' },
        limit: { type: 'integer', minimum: 1, maximum: MAX_LIMIT },
      },
    },
    timeoutMs: 5000,
    allowRepeat: true,
    async run(args, ctx) {
      const tiers = ctx.tiers;
      if (!tiers?.count()) return 'error: you have no tools to search (every tool you have is already callable)';
      const found = tiers.search(args.query, args.limit ?? DEFAULT_LIMIT);
      if (!found.length) return `no tool matches "${args.query}" (of ${tiers.count()}); try other words, or an empty query to list some`;
      const parts = found.map((tool) => {
        const schema = JSON.stringify(tool.parameters);
        const shown = schema.length > SCHEMA_MAX_CHARS ? `${schema.slice(0, SCHEMA_MAX_CHARS)}… (cut)` : schema;
        return `${tool.name}: ${tool.description}\nparameters: ${shown}`;
      });
      return `${found.length} of ${tiers.count()} tools; call tool_activate with a name to use it:\n\n${parts.join('\n\n')}`;
    },
  };
}
