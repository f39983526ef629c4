import { DateTime } from 'luxon';
import type { MemoryRegistry, RecalledMemory } from '#src/memory/store.ts';
import type { Tool } from '#src/tools/types.ts';
import { normalizeCategory } from './memory.ts';

interface Args {
  query?: string;
  date?: string;
  source?: 'all' | 'memories' | 'knowledge';
  category?: string;
  limit?: number;
}

const DEFAULT_LIMIT = 10;
const MAX_LIMIT = 50;
/** One memory's text in a result, at most; the whole answer, at most. */
const ITEM_MAX_CHARS = 1500;
const OUTPUT_MAX_CHARS = 12_000;

/** Finds the persona's memories again: ranked by a query, listed by day, or the most important and recent. */
export function createRecallTool(deps: { memory: MemoryRegistry; timezone: string }): Tool<Args> {
  return {
    name: 'recall',
    description:
      'Search your long-term memory (what you saved with the memory tool). query: words, names or a "quoted phrase"; ' +
      `the best matches come first, and misspelt names still match. date (YYYY-MM-DD, ${deps.timezone}): that day's memories. ` +
      'No query and no date: your most important and recent memories. category narrows to one category. ' +
      'Each result is tagged [memory <id>] for memory update/delete.',
    parameters: {
      type: 'object',
      additionalProperties: false,
      properties: {
        query: { type: 'string', maxLength: 500 },
        date: { type: 'string', pattern: '^\\d{4}-\\d{2}-\\d{2}$' },
        source: { enum: ['all', 'memories', 'knowledge'] },
        category: { type: 'string', minLength: 1, maxLength: 40 },
        limit: { type: 'integer', minimum: 1, maximum: MAX_LIMIT },
      },
    },
    timeoutMs: 15_000,
    allowRepeat: true,
    async run(args, ctx) {
      if (args.source === 'knowledge') return 'no knowledge yet: there is nothing ingested to search; recall your memories with source "memories"';
      const store = deps.memory.store;
      if (!store) return 'error: memory is not available here (no database)';
      let range: { from: Date; to: Date } | undefined;
      if (args.date !== undefined) {
        const day = DateTime.fromISO(args.date, { zone: deps.timezone });
        if (!day.isValid) return `error: "${args.date}" is not a date; use YYYY-MM-DD`;
        range = { from: day.startOf('day').toJSDate(), to: day.startOf('day').plus({ days: 1 }).toJSDate() };
      }
      const query = args.query?.trim() || undefined;
      const category = args.category === undefined ? undefined : normalizeCategory(args.category);
      const found = await store.recall(ctx.persona.name, { query, category, ...range, limit: args.limit ?? DEFAULT_LIMIT });
      const what = [query && `"${query}"`, args.date && `on ${args.date}`, category && `in ${category}`].filter(Boolean).join(' ');
      if (!found.length) return what ? `no memories ${query ? 'match ' : ''}${what}` : 'no memories yet';
      return renderResults(found, deps.timezone, what);
    },
  };
}

function renderResults(found: RecalledMemory[], timezone: string, what: string): string {
  const head = `${found.length} ${found.length === 1 ? 'memory' : 'memories'}${what ? ` ${what}` : ''}:`;
  const parts: string[] = [head];
  let length = head.length;
  for (const [i, m] of found.entries()) {
    const when = DateTime.fromJSDate(m.createdAt, { zone: timezone }).toFormat('yyyy-LL-dd HH:mm');
    const text = m.content.length > ITEM_MAX_CHARS ? `${m.content.slice(0, ITEM_MAX_CHARS)}… (cut)` : m.content;
    const item = `[memory ${m.id}] ${when} · ${m.category} · importance ${m.importance}\n${text}`;
    if (length + item.length > OUTPUT_MAX_CHARS) {
      parts.push(`(${found.length - i} more not shown: narrow the query or lower the limit)`);
      break;
    }
    parts.push(item);
    length += item.length + 2;
  }
  return parts.join('\n\n');
}
