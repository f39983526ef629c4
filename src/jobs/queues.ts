// Every pg-boss queue Parlor uses, in one place.
import type { Origin, TurnKind } from '#src/tools/types.ts';

export const QUEUES = {
  /** One job per reason a conversation takes a turn; FIFO and one at a time per conversation. */
  turn: 'turn',
} as const;

export interface TurnJobData {
  conversationId: string;
  persona: string;
  kind: TurnKind;
  /** For background turns: the text that starts the turn. */
  prompt?: string;
  origin?: Origin;
}
