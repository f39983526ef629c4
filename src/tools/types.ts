import type { Logger } from 'pino';
import type { Persona } from '#src/config/persona.ts';

export type TurnKind = 'user' | 'wake' | 'cron' | 'heartbeat' | 'subagent';

export const BACKGROUND_KINDS: readonly TurnKind[] = ['wake', 'cron', 'heartbeat', 'subagent'];

/** Where a turn came from: the chat (and message) to answer, when there is one. */
export interface Origin {
  connector: string;
  chat: string;
  thread?: string;
  messageId?: string;
  chatType?: 'dm' | 'group';
  sender?: string;
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
}

export interface ToolContext {
  persona: Persona;
  conversationId: string;
  turnId: string;
  kind: TurnKind;
  origin?: Origin;
  signal: AbortSignal;
  log: Logger;
  /** Sends text to a chat through the outbound ledger (at most once per turn and destination). */
  deliver(target: DeliveryTarget, text: string, options?: { dedupe?: string; files?: string[] }): Promise<DeliveryResult>;
  /** Connectors running anywhere in this deployment. */
  connectorIds(): string[];
  /** Reacts with an emoji to a message in the turn's chat (the triggering message when none is named). */
  react(emoji: string, messageId?: string): Promise<void>;
}

/** What a tool may tell the loop besides its text result. */
export interface ToolOutput {
  content: string;
  /** End the turn after this call (end_task, a successful ask_user). */
  endTurn?: { status: 'ok' | 'skipped' | 'failed'; summary?: string };
  /** Think harder on the following model calls of this turn. */
  thinking?: boolean;
}

export interface Tool<Args = any> {
  /** The model-facing snake_case name. */
  name: string;
  description: string;
  /** JSON Schema of the arguments (validated with ajv before `run`). */
  parameters: Record<string, unknown>;
  /** Turn kinds the tool is offered in; all when absent. */
  contexts?: readonly TurnKind[];
  timeoutMs?: number;
  /** Exempt from the repeated-call guard (polling tools, say). */
  allowRepeat?: boolean;
  available?(context: { persona: Persona; kind: TurnKind }): boolean;
  run(args: Args, ctx: ToolContext): Promise<string | ToolOutput>;
}
