import type { MemoryRegistry } from '#src/memory/store.ts';
import type { Tool } from '#src/tools/types.ts';

interface Args {
  dimension: string;
  content: string;
  confidence?: number;
}

export const USER_MODEL_CONTENT_MAX = 1000;
const DEFAULT_CONFIDENCE = 0.7;

/**
 * What the persona knows of the person it is talking to, one aspect at a time; it is in the system prompt of that
 * person's turns from then on.
 */
export function createUserModelWriteTool(deps: { memory: MemoryRegistry }): Tool<Args> {
  return {
    name: 'user_model_write',
    description:
      'Note what you have learnt about the person you are talking to (the sender of this message), one aspect (dimension) at a time: ' +
      'e.g. dimension "name", "preferences", "work", "communication_style". Writing a dimension again replaces it, so include what still holds. ' +
      'confidence 0..1 (default 0.7). It is shown to you in your conversations with this person.',
    parameters: {
      type: 'object',
      additionalProperties: false,
      required: ['dimension', 'content'],
      properties: {
        dimension: { type: 'string', minLength: 1, maxLength: 60 },
        content: { type: 'string', minLength: 1, maxLength: USER_MODEL_CONTENT_MAX },
        confidence: { type: 'number', minimum: 0, maximum: 1 },
      },
    },
    timeoutMs: 10_000,
    async run(args, ctx) {
      const user = ctx.kind === 'persona' ? undefined : ctx.origin?.sender;
      if (!user) return 'error: there is no person in this turn (it was not started by someone\'s message), so there is nobody to note this about';
      const store = deps.memory.store;
      if (!store) return 'error: memory is not available here (no database)';
      const dimension = args.dimension.trim().toLowerCase().replace(/\s+/g, '_');
      const content = args.content.trim();
      if (!dimension || !content) return 'error: dimension and content must not be empty';
      const { created } = await store.writeUserModel(ctx.persona.name, user, { dimension, content, confidence: args.confidence ?? DEFAULT_CONFIDENCE });
      return `${created ? 'noted' : 'updated'} "${dimension}" for ${user}`;
    },
  };
}
