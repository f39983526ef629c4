import type { Logger } from 'pino';
import type { Persona } from '#src/config/persona.ts';
import { parseConversationId } from '#src/conversation-id.ts';
import type { Queryable } from '#src/db/client.ts';
import type { HistoryRead } from '#src/db/messages.ts';
import type { ChatMessage } from '#src/llm/types.ts';
import type { TurnKind } from '#src/turns.ts';
import type { HistoryBudget } from './history.ts';
import { loadHistoryWindow, type SummaryRequest } from './history-window.ts';

/**
 * The history a turn starts from. When the window has stepped past the stored summary, the summary of what left it
 * is asked for (once per step, in a job); the turn goes on at once with what it has.
 */
export async function loadTurnHistory(
  deps: { db: Queryable; summaries?: SummaryRequest; log: Logger },
  persona: Persona,
  conversationId: string,
  afterId: number,
  budget: HistoryBudget,
  read?: HistoryRead,
): Promise<ChatMessage[]> {
  const window = await loadHistoryWindow(deps.db, conversationId, afterId, budget, read);
  if (window.summariseThrough !== undefined && deps.summaries) {
    await deps
      .summaries({ persona: persona.name, conversationId, throughMessageId: window.summariseThrough })
      .catch((err: unknown) => deps.log.warn({ err }, 'the summary of the earlier conversation could not be asked for; the turn goes on without it'));
  }
  return window.messages;
}

/** A background turn's opening message: the prompt as framed by whatever started it, else labelled by kind. */
export function backgroundPrompt(kind: TurnKind, prompt: string | undefined): string {
  if (prompt?.startsWith('[')) return prompt;
  const label = kind === 'wake' ? 'wake-up' : kind;
  return `[${label}] ${prompt ?? ''}`.trim();
}

/** The schedule entry a cron conversation belongs to. */
export function cronName(conversationId: string): string | undefined {
  const parts = parseConversationId(conversationId);
  return parts?.kind === 'cron' ? parts.name : undefined;
}

