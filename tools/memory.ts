import type { MemoryRegistry } from '#src/memory/store.ts';
import type { Tool } from '#src/tools/types.ts';

interface Args {
  action: 'write' | 'update' | 'delete';
  category?: string;
  content?: string;
  importance?: number;
  id?: number;
}

export const MEMORY_CONTENT_MAX = 4000;
const DEFAULT_CATEGORY = 'note';
const DEFAULT_IMPORTANCE = 5;

/** Categories are compared as written, so they are kept lower-case and trimmed. */
export const normalizeCategory = (category: string) => category.trim().toLowerCase().replace(/\s+/g, ' ');

/** The persona's journal: what it writes here it finds again with recall, in any later conversation. */
export function createMemoryTool(deps: { memory: MemoryRegistry }): Tool<Args> {
  return {
    name: 'memory',
    description:
      'Your long-term journal, kept across conversations and found again with recall. ' +
      'write {content, category?, importance? 1..10}: remember something worth keeping (a fact, a decision, a promise), one self-contained statement, with names and dates. ' +
      'update {id, content?, category?, importance?}: correct a memory; delete {id}: forget it. ids are the numbers recall shows as [memory <id>].',
    parameters: {
      type: 'object',
      additionalProperties: false,
      required: ['action'],
      properties: {
        action: { enum: ['write', 'update', 'delete'] },
        category: { type: 'string', minLength: 1, maxLength: 40, description: `a short topic such as person, preference, project, event (default ${DEFAULT_CATEGORY})` },
        content: { type: 'string', minLength: 1, maxLength: MEMORY_CONTENT_MAX },
        importance: { type: 'integer', minimum: 1, maximum: 10, description: `how much it matters (default ${DEFAULT_IMPORTANCE})` },
        id: { type: 'integer', minimum: 1 },
      },
    },
    timeoutMs: 10_000,
    async run(args, ctx) {
      const store = deps.memory.store;
      if (!store) return 'error: memory is not available here (no database)';
      const persona = ctx.persona.name;
      const category = args.category === undefined ? undefined : normalizeCategory(args.category);
      if (category === '') return 'error: category is empty';
      const content = args.content?.trim();
      if (args.action === 'write') {
        if (!content) return 'error: write needs content: what to remember';
        const saved = await store.write(persona, { category: category ?? DEFAULT_CATEGORY, content, importance: args.importance ?? DEFAULT_IMPORTANCE });
        return `saved [memory ${saved.id}] (${saved.category}, importance ${saved.importance})`;
      }
      if (args.id === undefined) return `error: ${args.action} needs the id of a memory (recall shows them as [memory <id>])`;
      if (args.action === 'delete') {
        return (await store.delete(persona, args.id)) ? `deleted [memory ${args.id}]` : notFound(args.id);
      }
      if (args.content !== undefined && !content) return 'error: content is empty; to forget a memory use delete';
      if (content === undefined && category === undefined && args.importance === undefined) {
        return 'error: update needs content, category or importance: what to change';
      }
      const updated = await store.update(persona, args.id, {
        ...(content !== undefined ? { content } : {}),
        ...(category !== undefined ? { category } : {}),
        ...(args.importance !== undefined ? { importance: args.importance } : {}),
      });
      return updated ? `updated [memory ${updated.id}] (${updated.category}, importance ${updated.importance})` : notFound(args.id);
    },
  };
}

const notFound = (id: number) => `error: there is no memory ${id}; recall shows the ids of your memories`;
