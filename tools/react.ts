import type { Tool } from '#src/tools/types.ts';

interface Args {
  emoji: string;
  message_id?: string;
}

/** Reacts to the message that started the turn (or a named one in the same chat) with an emoji. */
export function createReactTool(): Tool<Args> {
  return {
    name: 'react',
    description:
      'React to the message you are answering (or message_id in the same chat) with one emoji, e.g. "👍" or "🎉". ' +
      'A reaction can replace a short reply such as "ok" or "thanks".',
    parameters: {
      type: 'object',
      additionalProperties: false,
      required: ['emoji'],
      properties: { emoji: { type: 'string', minLength: 1, maxLength: 16 }, message_id: { type: 'string', minLength: 1 } },
    },
    contexts: ['user'],
    timeoutMs: 30_000,
    async run(args, ctx) {
      try {
        await ctx.react(args.emoji, args.message_id);
        return `reacted with ${args.emoji}`;
      } catch (err) {
        return `error: ${err instanceof Error ? err.message : String(err)}`;
      }
    },
  };
}
