import { documentText } from '#src/memory/document-text.ts';
import type { MemoryRegistry } from '#src/memory/store.ts';
import type { Tool } from '#src/tools/types.ts';
import type { WorkspaceRules } from '#src/tools/workspace.ts';
import { readWorkspaceFile } from '#src/tools/workspace-read.ts';

interface Args {
  source: string;
  path?: string;
  text?: string;
}

/** Past this many bytes a file is ingested by a job, and the tool returns at once. */
export const INGEST_IN_TURN_MAX_BYTES = 200 * 1024;
const TEXT_MAX_CHARS = 100_000;

/**
 * Gives the persona a document to read: a workspace file (text, Markdown, PDF) or text, cut into chunks that recall
 * finds with its memories. The same source name again replaces what it had.
 */
export function createKnowledgeIngestTool(deps: { memory: MemoryRegistry } & WorkspaceRules): Tool<Args> {
  return {
    name: 'knowledge_ingest',
    description:
      'Add a document to your knowledge, which recall searches beside your memories: path (a text, Markdown or PDF file in your workspace) or text. ' +
      'source names it (e.g. "handbook"); ingesting the same source again replaces it. Results come back tagged [knowledge <source>#<chunk>]. ' +
      `Files over ${INGEST_IN_TURN_MAX_BYTES / 1024} KB are ingested in the background. recall with source "knowledge" and no query lists your documents.`,
    parameters: {
      type: 'object',
      additionalProperties: false,
      required: ['source'],
      properties: {
        source: { type: 'string', minLength: 1, maxLength: 80, description: 'a short name for the document' },
        path: { type: 'string', minLength: 1, description: 'relative to your workspace' },
        text: { type: 'string', minLength: 1, maxLength: TEXT_MAX_CHARS },
      },
    },
    timeoutMs: 60_000,
    async run(args, ctx) {
      const knowledge = deps.memory.knowledge;
      if (!knowledge) return 'error: knowledge is not available here (no database)';
      const source = args.source.trim().replace(/\s+/g, ' ');
      if (!source) return 'error: source is empty; give the document a short name';
      if ((args.path === undefined) === (args.text === undefined)) return 'error: give either path (a file in your workspace) or text, not both';
      const persona = ctx.persona.name;
      if (args.text !== undefined) {
        if (!args.text.trim()) return 'error: text is empty';
        if (args.text.length > TEXT_MAX_CHARS) return `error: text is over ${TEXT_MAX_CHARS} characters; write it to a file in your workspace and ingest its path`;
        return done(source, (await knowledge.ingestText(persona, source, args.text)).chunks);
      }
      let text: string;
      let relative: string;
      try {
        const file = await readWorkspaceFile(ctx.persona, args.path!, deps);
        relative = file.relative;
        if (file.bytes.length > INGEST_IN_TURN_MAX_BYTES) {
          await knowledge.ingestLater(persona, source, relative);
          return `ingesting ${source} in the background; recall finds it when it is ready`;
        }
        text = await documentText(args.path!, file.bytes);
      } catch (err) {
        return `error: ${(err as Error).message}`;
      }
      if (!text.trim()) return `error: "${args.path}" has no text in it`;
      return done(source, (await knowledge.ingestText(persona, source, text, relative)).chunks);
    },
  };
}

const done = (source: string, chunks: number) =>
  `ingested ${source}: ${chunks} ${chunks === 1 ? 'chunk' : 'chunks'}; recall finds them, tagged [knowledge ${source}#<chunk>]`;
