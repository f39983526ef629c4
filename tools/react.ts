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
      'React to the message you are answering (or message_id in the same chat) with one emoji, e.g. "👍" or "🎉" (or a server\'s own emoji written as it appears in messages, <:name:id>). ' +
      'A reaction can replace a short reply such as "ok" or "thanks".',
    parameters: {
      type: 'object',
      additionalProperties: false,
      required: ['emoji'],
      properties: { emoji: { type: 'string', minLength: 1, maxLength: 64 }, message_id: { type: 'string', minLength: 1 } },
    },
    contexts: ['user'],
    timeoutMs: 30_000,
    async run(args, ctx) {
      const emoji = args.emoji.trim();
      // One convention everywhere: the emoji itself. Each connector maps it to its platform's form (Slack's names).
      // A server's own emoji (`<:name:id>`, as a platform writes it in messages) passes as it is.
      if (!/^(?:\p{Extended_Pictographic}|\p{Regional_Indicator}|[#*0-9]\uFE0F?\u20E3)/u.test(emoji) && !/^<a?:\w{2,32}:\d{5,25}>$/.test(emoji)) {
        return `error: "${args.emoji}" is not an emoji; write the emoji itself, e.g. "👍", not its name`;
      }
      try {
        const done = await ctx.react(emoji, args.message_id);
        return done === 'queued' ? `reaction ${emoji} queued (it is set by the process that runs this chat's connector)` : `reacted with ${emoji}`;
      } catch (err) {
        return `error: ${err instanceof Error ? err.message : String(err)}`;
      }
    },
  };
}
