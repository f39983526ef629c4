import type { Tool } from '#src/tools/types.ts';

const DEFAULT_TIMEOUT_S = 120;
const MAX_TIMEOUT_S = 600;

/** Asks another persona and waits for its reply (it answers under its own soul, tools and secrets). */
export function createAskPersonaTool(): Tool<{ persona: string; text: string; timeout_s?: number }> {
  return {
    name: 'ask_persona',
    description:
      'Ask another persona (with its own soul, tools and secrets) and wait for its reply, which is this tool\'s result. ' +
      `It waits up to timeout_s seconds (default ${DEFAULT_TIMEOUT_S}, at most ${MAX_TIMEOUT_S}); a later reply arrives as a message from it. ` +
      'Later asks to the same persona see the earlier exchange.',
    parameters: {
      type: 'object',
      additionalProperties: false,
      required: ['persona', 'text'],
      properties: {
        persona: { type: 'string', minLength: 1, maxLength: 64 },
        text: { type: 'string', minLength: 1, maxLength: 20_000 },
        timeout_s: { type: 'integer', minimum: 1, maximum: MAX_TIMEOUT_S },
      },
    },
    // The wait is the other persona's work, not this tool's: the tool's own limit sits above the longest wait.
    timeoutMs: (MAX_TIMEOUT_S + 10) * 1000,
    async run(args, ctx) {
      if (!ctx.personaMail) return 'error: other personas are not reachable here';
      const answer = await ctx.personaMail.ask(args.persona, args.text, (args.timeout_s ?? DEFAULT_TIMEOUT_S) * 1000, ctx.signal);
      if ('error' in answer) return `refused: ${answer.error}`;
      if ('pending' in answer) return `no reply from ${args.persona} within ${args.timeout_s ?? DEFAULT_TIMEOUT_S} s; it arrives as a message from it when it has answered`;
      return answer.reply;
    },
  };
}
