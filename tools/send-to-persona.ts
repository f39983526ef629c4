import type { Tool } from '#src/tools/types.ts';

/** Hands a message to another persona; its reply comes back later as a message in this persona's inbox with it. */
export function createSendToPersonaTool(): Tool<{ persona: string; text: string }> {
  return {
    name: 'send_to_persona',
    description:
      'Send a message to another persona (with its own soul, tools and secrets) and go on at once. Its reply arrives ' +
      'later as a message from it in a conversation of its own, where you decide whether to tell your person. Use ' +
      'ask_persona to wait for the reply instead.',
    parameters: {
      type: 'object',
      additionalProperties: false,
      required: ['persona', 'text'],
      properties: { persona: { type: 'string', minLength: 1, maxLength: 64 }, text: { type: 'string', minLength: 1, maxLength: 20_000 } },
    },
    timeoutMs: 15_000,
    async run(args, ctx) {
      if (!ctx.personaMail) return 'error: other personas are not reachable here';
      const sent = await ctx.personaMail.send(args.persona, args.text);
      if ('error' in sent) return `refused: ${sent.error}`;
      return `sent to ${args.persona}; its reply arrives as a message from it when it has answered`;
    },
  };
}
