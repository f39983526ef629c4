import type { QuestionRow } from '#src/db/questions.ts';
import type { ToolContext } from '#src/tools/types.ts';
import type { Choice } from './format.ts';
import type { DeliveryTarget } from '#src/turns.ts';

/** The turn a question belongs to. */
export type QuestionScope = Pick<ToolContext, 'persona' | 'conversationId' | 'turnId' | 'kind' | 'origin' | 'signal'>;

/** Nobody answered in time. */
export class RemoteMethodTimeout extends Error {
  override name = 'RemoteMethodTimeout';
}

/** The turn stopped (or Parlor shut down) while it waited. */
export class RemoteMethodCancelled extends Error {
  override name = 'RemoteMethodCancelled';
}

/** Persists a question, shows it, and resolves with its answered row; rejects with the errors above. */
export type WaitForAnswer = (
  scope: QuestionScope,
  request: {
    kind: 'approval' | 'remote';
    method: string;
    data: unknown;
    text: string;
    choices: Choice[];
    timeoutMs: number;
    destination?: DeliveryTarget;
    approversOnly: boolean;
  },
) => Promise<QuestionRow>;
