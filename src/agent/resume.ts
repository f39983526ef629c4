import type { Logger } from 'pino';
import type { ChatMessage } from '#src/llm/types.ts';
import type { ToolRunner } from '#src/tools/runner.ts';
import type { Tool, ToolContext } from '#src/tools/types.ts';
import { INTERRUPTED_RESULT } from './history.ts';

/**
 * The answer a resumed turn had written before the crash (its transcript ends on the model's final text), which
 * never reached the ledger: it is sent as it was. Calling the model again would answer a question already answered
 * (and, reading the answer as the last word, often with something else).
 */
export function answeredBeforeCrash(history: readonly ChatMessage[]): string | undefined {
  const last = history[history.length - 1];
  return last?.role === 'assistant' && !last.toolCalls?.length ? last.content : undefined;
}

/**
 * A turn resumed after a crash may end on calls that never reported (the process died while they ran). Those a
 * tool can run again to no further effect (`Tool.resumable`: a reminder keyed by its call id) are run again with
 * the same call id and their results stored, so the model reads what happened rather than "interrupted", which
 * leaves it to guess, and often to do it twice. The rest keep the "interrupted" result. `history` is updated.
 */
export async function rerunInterruptedCalls(
  history: ChatMessage[],
  deps: { tools: ToolRunner; offered: readonly Tool[]; ctx: ToolContext; store: (message: ChatMessage) => Promise<void>; log: Logger },
): Promise<void> {
  let start = history.length;
  while (start > 0 && history[start - 1].role === 'tool') start--;
  const asked = history[start - 1];
  if (!asked || asked.role !== 'assistant' || !asked.toolCalls?.length) return;
  for (let i = start; i < history.length; i++) {
    const result = history[i];
    if (result.role !== 'tool' || result.content !== INTERRUPTED_RESULT) continue;
    const call = asked.toolCalls.find((c) => c.id === result.toolCallId);
    if (!call || !deps.tools.resumable(call, deps.offered)) continue;
    const output = await deps.tools.execute(call, deps.offered, deps.ctx);
    const message: ChatMessage = { role: 'tool', toolCallId: call.id, name: call.name, content: output.content };
    await deps.store(message);
    history[i] = message;
    deps.log.info({ tool: call.name }, 'a call cut off by a restart was run again');
  }
}
