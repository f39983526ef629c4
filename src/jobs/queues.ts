// Every pg-boss queue Parlor uses, in one place.
import type { DeliveryTarget, Origin, TurnKind } from '#src/tools/types.ts';

export const QUEUES = {
  /** One job per reason a conversation takes a turn; FIFO and one at a time per conversation. */
  turn: 'turn',
  /** One job per firing of a reminder or wake-up, due at its time. */
  reminder: 'reminder',
  /** Heartbeat and cron entries of `schedules.jsonc`: pg-boss schedules send one job per occurrence. */
  cron: 'cron',
} as const;

export interface TurnJobData {
  conversationId: string;
  persona: string;
  kind: TurnKind;
  /** For background turns: the text that starts the turn. */
  prompt?: string;
  origin?: Origin;
  /** Where `reply_to_origin` delivers (a reminder's `deliver_to`, a schedule's `deliver`); the origin when absent. */
  deliver?: DeliveryTarget;
  /** What started a background turn (`reminder:<id>`), so a repeat can tell its previous turn is still waiting. */
  source?: string;
}

export interface ReminderJobData {
  reminderId: string;
  /** Which firing this job is (the reminder's `fires` count when it was scheduled). */
  fire: number;
}

export interface CronJobData {
  persona: string;
  name: string;
}
