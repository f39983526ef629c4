// What a turn is, whatever runs it: its kinds, where it came from and where it speaks, and the job that starts it.

/**
 * `task`: a background task's own turn (spawn_subagent), in its conversation; `subagent`: the wake that brings the
 * results of a batch of tasks back to the conversation that started them; `persona`: a message from another persona,
 * in the inbox conversation with it.
 */
export type TurnKind = 'user' | 'wake' | 'cron' | 'heartbeat' | 'subagent' | 'task' | 'persona';

export const BACKGROUND_KINDS: readonly TurnKind[] = ['wake', 'cron', 'heartbeat', 'subagent', 'task', 'persona'];

/** Turns whose final text is an answer: sent to their chat (a user turn, a task batch's results), or a task's result. */
export function answersInText(kind: TurnKind, origin: Origin | undefined): boolean {
  return kind === 'user' || kind === 'task' || kind === 'persona' || (kind === 'subagent' && origin !== undefined);
}

/** Where a turn came from: the chat (and message) to answer, when there is one. */
export interface Origin {
  connector: string;
  chat: string;
  thread?: string;
  messageId?: string;
  chatType?: 'dm' | 'group';
  sender?: string;
  /** The sender is the local owner (the terminal); only local connectors vouch for that. */
  trusted?: boolean;
}

export interface DeliveryTarget {
  connector: string;
  chat: string;
  thread?: string;
  replyTo?: string;
}

export interface DeliveryResult {
  status: 'sent' | 'queued' | 'duplicate' | 'failed';
  error?: string;
  /** Sent: the platform ids of its parts, and the thread it landed in when the connector opened one. */
  ids?: string[];
  thread?: string;
  /** Sent, and the end of its turn (`endsTurn`) was recorded with it. */
  turnEnded?: boolean;
  /** Sent, and the turn's job (`endsTurn.job`) completed with it. */
  jobCompleted?: boolean;
}

/** The job that starts a turn: every reason a conversation takes one is a job on the turn queue. */
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
  /** Every source of a wake turn that reminders falling due together joined (see joinWaitingWake). */
  sources?: string[];
  /** The personas whose messages led to this turn, oldest first (a message that would close a loop is refused). */
  chain?: string[];
  /** A `persona` turn whose sender waits for its reply (ask_persona). */
  askId?: string;
}

/** The short line a failed background turn leaves in the primary chat; the details stay in the log. */
export function backgroundFailureWarning(persona: string, kind: TurnKind, reason?: string): string {
  const line = reason?.split('\n')[0].trim();
  const short = line && line.length > 80 ? `${line.slice(0, 80)}…` : line;
  return `⚠️ ${persona}: a ${kind === 'wake' ? 'reminder' : kind} turn failed${short ? ` (${short})` : ''}.`;
}
