import { DateTime } from '#src/luxon.ts';
import type { KnowledgeSource } from '#src/memory/knowledge.ts';
import type { MemoryRegistry, RecallHit } from '#src/memory/store.ts';
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

/**
 * Finds the persona's memories again (ranked by a query, listed by day, or the most important and recent), and what
 * it was given to read (knowledge_ingest), ranked with them.
 */
export function createRecallTool(deps: { memory: MemoryRegistry; timezone: string }): Tool<Args> {
  return {
    name: 'recall',
    description:
      'Search your long-term memory (what you saved with the memory tool) and your knowledge (documents you ingested with knowledge_ingest). ' +
      'query: words, names or a "quoted phrase"; the best matches come first, and misspelt names still match. ' +
      `date (YYYY-MM-DD, ${deps.timezone}): that day's memories. No query and no date: your most important and recent memories. ` +
      'category narrows to one category of memories. source: all (default), memories or knowledge (with no query: the documents you have). ' +
      'Each result is tagged [memory <id>] (for memory update/delete) or [knowledge <source>#<chunk>].',
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
      const store = deps.memory.store;
      if (!store) return 'error: memory is not available here (no database)';
      const source = args.source ?? 'all';
      const knowledge = deps.memory.knowledge;
      let range: { from: Date; to: Date } | undefined;
      if (args.date !== undefined) {
        const day = DateTime.fromISO(args.date, { zone: deps.timezone });
        if (!day.isValid) return `error: "${args.date}" is not a date; use YYYY-MM-DD`;
        range = { from: day.startOf('day').toJSDate(), to: day.startOf('day').plus({ days: 1 }).toJSDate() };
      }
      const query = args.query?.trim() || undefined;
      const category = args.category === undefined ? undefined : normalizeCategory(args.category);
      if (source === 'knowledge' && (category !== undefined || range)) return 'error: category and date narrow memories; knowledge has neither (use source "memories")';
      const sources = knowledge && source !== 'memories' && !category && !range && (query || source === 'knowledge') ? await knowledge.sources(ctx.persona.name) : [];
      if (source === 'knowledge' && (!query || !sources.length)) return listSources(sources);
      const found = await store.recall(ctx.persona.name, { query, category, ...range, source, limit: args.limit ?? DEFAULT_LIMIT });
      const what = [query && `"${query}"`, args.date && `on ${args.date}`, category && `in ${category}`].filter(Boolean).join(' ');
      const note = pendingNote(sources);
      if (!found.length) {
        // A persona that was given nothing to read hears only of its memories.
        const searched = source === 'knowledge' ? 'no knowledge matches' : sources.length ? 'no memories or knowledge match' : 'no memories match';
        const text = what ? `${query ? searched : 'no memories'} ${what}` : 'no memories yet';
        return note ? `${text}\n${note}` : text;
      }
      const text = renderResults(found, deps.timezone, what);
      return note ? `${text}\n\n${note}` : text;
    },
  };
}

function renderResults(found: RecallHit[], timezone: string, what: string): string {
  const memories = found.filter((h) => h.kind === 'memory').length;
  const chunks = found.length - memories;
  const counts = [
    memories && `${memories} ${memories === 1 ? 'memory' : 'memories'}`,
    chunks && `${chunks} knowledge ${chunks === 1 ? 'chunk' : 'chunks'}`,
  ].filter(Boolean);
  const head = `${counts.join(' and ')}${what ? ` ${what}` : ''}:`;
  const parts: string[] = [head];
  let length = head.length;
  for (const [i, hit] of found.entries()) {
    const item = renderHit(hit, timezone);
    if (length + item.length > OUTPUT_MAX_CHARS) {
      parts.push(`(${found.length - i} more not shown: narrow the query or lower the limit)`);
      break;
    }
    parts.push(item);
    length += item.length + 2;
  }
  return parts.join('\n\n');
}

function renderHit(hit: RecallHit, timezone: string): string {
  const cut = (text: string) => (text.length > ITEM_MAX_CHARS ? `${text.slice(0, ITEM_MAX_CHARS)}… (cut)` : text);
  if (hit.kind === 'knowledge') return `[knowledge ${hit.chunk.source}#${hit.chunk.chunk}]\n${cut(hit.chunk.content)}`;
  const m = hit.memory;
  const when = DateTime.fromJSDate(m.createdAt, { zone: timezone }).toFormat('yyyy-LL-dd HH:mm');
  return `[memory ${m.id}] ${when} · ${m.category} · importance ${m.importance}\n${cut(m.content)}`;
}

const MAX_LISTED_SOURCES = 100;

/** The persona's documents, one line each. */
function listSources(sources: KnowledgeSource[]): string {
  if (!sources.length) return 'no knowledge yet: ingest a document with knowledge_ingest';
  const lines = sources.slice(0, MAX_LISTED_SOURCES).map((s) => {
    const state = s.state === 'ready' ? `${s.chunks} ${s.chunks === 1 ? 'chunk' : 'chunks'}` : s.state === 'failed' ? `failed: ${s.error ?? 'unknown error'}` : 'still ingesting';
    return `- ${s.source}${s.path ? ` (${s.path})` : ''}: ${state}`;
  });
  if (sources.length > MAX_LISTED_SOURCES) lines.push(`(${sources.length - MAX_LISTED_SOURCES} more)`);
  return `${sources.length} knowledge ${sources.length === 1 ? 'source' : 'sources'}:\n${lines.join('\n')}`;
}

/** What recall could not search yet: sources still being ingested, and those that failed. */
function pendingNote(sources: KnowledgeSource[]): string {
  const ingesting = sources.filter((s) => s.state === 'ingesting').map((s) => s.source);
  const failed = sources.filter((s) => s.state === 'failed').map((s) => s.source);
  return [
    ingesting.length ? `(still ingesting: ${ingesting.slice(0, 10).join(', ')}; recall finds ${ingesting.length === 1 ? 'it' : 'them'} when ready)` : '',
    failed.length ? `(failed to ingest: ${failed.slice(0, 10).join(', ')}; recall with source "knowledge" and no query says why)` : '',
  ]
    .filter(Boolean)
    .join('\n');
}
