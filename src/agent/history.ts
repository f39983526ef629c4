import type { ChatMessage } from '#src/llm/types.ts';

export interface HistoryBudget {
  /** At most this many stored messages are read. */
  maxMessages: number;
  /** Rough size cap of the window, in characters (~4 per token). */
  maxChars: number;
}

export const DEFAULT_HISTORY_BUDGET: HistoryBudget = { maxMessages: 80, maxChars: 80_000 };

/** What a call that never reported is answered with (see repairToolPairs). */
export const INTERRUPTED_RESULT = 'interrupted: the turn stopped before this tool reported a result.';

/**
 * Providers reject a tool call without its result, or a result without its call. A process that died between
 * the two leaves such a gap; it is filled with an explicit "interrupted" result, and stray results are dropped.
 */
export function repairToolPairs(messages: ChatMessage[]): ChatMessage[] {
  const out: ChatMessage[] = [];
  for (let i = 0; i < messages.length; i++) {
    const message = messages[i];
    if (message.role === 'tool') continue; // results are placed right after their call below
    out.push(message);
    if (message.role !== 'assistant' || !message.toolCalls?.length) continue;
    const results = new Map<string, ChatMessage>();
    for (let j = i + 1; j < messages.length && messages[j].role === 'tool'; j++) {
      const result = messages[j] as Extract<ChatMessage, { role: 'tool' }>;
      results.set(result.toolCallId, result);
    }
    for (const call of message.toolCalls) {
      out.push(
        results.get(call.id) ?? { role: 'tool', toolCallId: call.id, name: call.name, content: INTERRUPTED_RESULT },
      );
    }
  }
  return out;
}

export function fitWindow(messages: ChatMessage[], maxChars: number): ChatMessage[] {
  let start = 0;
  let total = messages.reduce((n, m) => n + messageSize(m), 0);
  while (total > maxChars && start < messages.length - 1) total -= messageSize(messages[start++]);
  while (start < messages.length && messages[start].role !== 'user') start++;
  const window = messages.slice(start);
  if (window.length === 0 && messages.length > 0) {
    const lastUser = [...messages].reverse().find((m) => m.role === 'user');
    if (lastUser) return [{ role: 'user', content: lastUser.content.slice(-maxChars) }];
  }
  return window;
}

/** What a message counts against a budget, in characters: its text, and a tool call's name and arguments. */
export function messageSize(message: ChatMessage): number {
  if (message.role === 'assistant') {
    return message.content.length + (message.toolCalls ?? []).reduce((n, c) => n + c.name.length + c.arguments.length, 0);
  }
  return message.content.length;
}
