import type { Tool } from '#src/tools/types.ts';

export function createThinkHarderTool(): Tool<{ reason?: string }> {
  return {
    name: 'think_harder',
    description: 'Switch on deeper reasoning for the rest of this turn. Use it for hard problems before answering.',
    parameters: { type: 'object', additionalProperties: false, properties: { reason: { type: 'string' } } },
    timeoutMs: 1000,
    async run() {
      return { content: 'Deeper reasoning is on for the rest of this turn.', thinking: true };
    },
  };
}
