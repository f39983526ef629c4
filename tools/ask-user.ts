import { MAX_CHOICES } from '#src/questions/service.ts';
import { parseDuration } from '#src/tools/duration.ts';
import { explicitTarget, originTarget, primaryTarget } from '#src/tools/targets.ts';
import type { Tool, ToolContext } from '#src/tools/types.ts';
import type { DeliveryTarget } from '#src/turns.ts';

interface Args {
  question: string;
  choices?: string[];
  expires_in?: string | number;
  connector?: string;
  to?: string;
  thread?: string;
}

const DEFAULT_EXPIRY_MS = 60 * 60_000;
const MAX_EXPIRY_MS = 30 * 24 * 60 * 60_000;

/**
 * Asks a person a question with buttons and ends the turn. The answer arrives later in this conversation as a
 * message (`[answer to Q#… "…" (…)]`), also after a restart; a typed reply in that chat answers it too.
 */
export function createAskUserTool(): Tool<Args> {
  return {
    name: 'ask_user',
    description:
      'Ask a person a question with buttons, then stop: this ends your turn, and the answer comes back later as a new message ' +
      '"[answer to Q#id ...]". choices default to Yes/No (at most 5). expires_in is e.g. "30m", "2h" or seconds (default 1h). ' +
      'It goes to the current chat (where there are no buttons, the person answers by typing; in a scheduled turn, to your primary chat); connector+to send it elsewhere.',
    parameters: {
      type: 'object',
      additionalProperties: false,
      required: ['question'],
      properties: {
        question: { type: 'string', minLength: 1, maxLength: 2000 },
        choices: { type: 'array', items: { type: 'string', minLength: 1, maxLength: 60 }, minItems: 1, maxItems: MAX_CHOICES, uniqueItems: true },
        expires_in: { type: ['string', 'number'] },
        connector: { type: 'string', minLength: 1 },
        to: { type: 'string', minLength: 1 },
        thread: { type: 'string', minLength: 1 },
      },
    },
    async run(args, ctx) {
      const expiry = args.expires_in === undefined ? { ms: DEFAULT_EXPIRY_MS } : parseDuration(args.expires_in, 'seconds');
      if ('error' in expiry) return `error: expires_in ${expiry.error}`;
      if (expiry.ms < 10_000 || expiry.ms > MAX_EXPIRY_MS) return 'error: expires_in must be between 10 seconds and 30 days';
      const destination = chooseDestination(args, ctx);
      if ('error' in destination) return `error: ${destination.error}`;
      const asked = await ctx.askUser({ question: args.question, choices: args.choices ?? ['Yes', 'No'], expiresInMs: expiry.ms, destination });
      const where = `${destination.connector}:${destination.chat}`;
      return {
        content: `asked Q#${asked.short} in ${where}; the answer will arrive as a new message. Your turn ends here.`,
        endTurn: { status: 'ok', summary: `asked Q#${asked.short}` },
      };
    },
  };
}

function chooseDestination(args: Args, ctx: ToolContext): DeliveryTarget | { error: string } {
  const { persona, origin } = ctx;
  if (args.to || args.connector) {
    const connector = args.connector ?? origin?.connector;
    if (!connector || !args.to) return { error: 'give both connector and to (the chat id), or neither' };
    return explicitTarget(ctx, { connector, chat: args.to, thread: args.thread });
  }
  // A person's own turn asks them where they are: a chat without buttons (the terminal) is answered by typing.
  const own = origin && ctx.kind === 'user' ? originTarget(origin) : undefined;
  if (own) return own;
  const primary = primaryTarget(persona);
  if (primary) return primary;
  return { error: 'no chat to ask in: give connector and to, or set "primary" in connectors.jsonc' };
}
