import { primaryTarget } from '#src/tools/targets.ts';
import type { Tool } from '#src/tools/types.ts';
import { deliveryOutcome } from './send-message.ts';

interface Args {
  text: string;
}

/**
 * The one final message of a scheduled turn: to the target captured when it was scheduled, else the chat it came
 * from, else the persona's primary. A second call in the same turn does not post again.
 */
export function createReplyToOriginTool(): Tool<Args> {
  return {
    name: 'reply_to_origin',
    description:
      'Send your message to the person who set up this reminder, wake-up or schedule (the chat it came from, or where it was told to deliver). ' +
      'Use it once, for your final message; a second call in the same turn is not sent again.',
    parameters: {
      type: 'object',
      additionalProperties: false,
      required: ['text'],
      properties: { text: { type: 'string', minLength: 1, maxLength: 40_000 } },
    },
    contexts: ['wake', 'cron', 'heartbeat'],
    timeoutMs: 150_000,
    // One reply a turn, keyed by the turn in the ledger: run again, it sends what did not go out, and nothing twice.
    resumable: () => true,
    async run(args, ctx) {
      const target = ctx.replyTarget ?? primaryTarget(ctx.persona);
      if (!target) return 'error: this turn has no chat to reply to, and no "primary" is set in connectors.jsonc; use send_message with connector and to';
      const where = `${target.connector}:${target.chat}${target.thread ? `:${target.thread}` : ''}`;
      const result = await ctx.deliver(target, args.text, { dedupe: `reply-to-origin:${where}` });
      return deliveryOutcome(result, where, 'your reply already went');
    },
  };
}
