// How questions look: to people in chats (texts, outcomes, notices) and to the HTTP API (the view).
import type { InboundEvent } from '#src/connector.ts';
import type { QuestionAnswer, QuestionRow } from '#src/db/questions.ts';
import type { ChoiceSpec } from '#src/tools/types.ts';
import { shortQuestionId } from './codec.ts';

export const MAX_CHOICES = 5;
export const INACTIVE = 'This button is no longer active.';

export interface Choice {
  id: string;
  label: string;
  value?: unknown;
}

/** A question as the HTTP API and its listeners see it. */
export interface QuestionView {
  id: string;
  kind: QuestionRow['kind'];
  method: string;
  data: unknown;
  text: string;
  choices: Choice[];
  persona: string;
  conversationId: string;
  chat?: { connector: string; chat: string; thread?: string };
  status: QuestionRow['status'];
  expiresAt: string;
  createdAt: string;
  answer?: QuestionAnswer;
  answeredBy?: string;
  answeredVia?: string;
  expiredReason?: string;
}


export function normalizeChoices(specs: readonly ChoiceSpec[]): Choice[] {
  return specs.slice(0, MAX_CHOICES).map((spec, i) =>
    typeof spec === 'string' ? { id: String(i + 1), label: spec, value: spec } : { id: String(i + 1), label: spec.label, value: spec.value ?? spec.label },
  );
}

export function pickChoice(choices: Choice[], text: string): Choice | undefined {
  const lowered = text.toLowerCase();
  return choices.find((c) => c.label.toLowerCase() === lowered) ?? choices.find((_, i) => text === String(i + 1));
}

export function who(event: InboundEvent): string {
  if (event.sender.username) return `@${event.sender.username}`;
  return event.sender.name ?? event.sender.id;
}

export function closedNotice(row: QuestionRow): string {
  if (row.status === 'answered') return `Already answered${row.answeredBy ? ` by ${row.answeredBy}` : ''}.`;
  if (row.status === 'expired' || row.expiresAt.getTime() <= Date.now()) return 'This question has expired.';
  return INACTIVE;
}

/**
 * A question longer than this is shown as its text, then a short message with the buttons, so that updating the
 * button message once it is answered leaves the text as it was. Short enough that a question at the limit fits one
 * message on every platform even when each character is escaped (Telegram: 4,096 characters of HTML).
 */
export const LONG_QUESTION = 800;

/**
 * A long question's first line with its short id: its text and its buttons message both begin so, and so does the
 * outcome, so that two long questions asked at once in one chat are told apart.
 */
function longQuestionLabel(row: Pick<QuestionRow, 'id' | 'text'>): string {
  return `${row.text.split('\n')[0]} · Q#${shortQuestionId(row.id)}`;
}

/** What a question's first message says: the question, a long one with its short id on its first line. */
export function questionText(row: Pick<QuestionRow, 'id' | 'text'>): string {
  if (row.text.length <= LONG_QUESTION) return row.text;
  const newline = row.text.indexOf('\n');
  return newline < 0 ? longQuestionLabel(row) : longQuestionLabel(row) + row.text.slice(newline);
}

/** The short message under a long question's text that carries its buttons. */
export function buttonsLine(row: Pick<QuestionRow, 'id' | 'text'>): string {
  return `${longQuestionLabel(row)} (shown above)`;
}

/** The question's message once it is resolved: what was asked (a long one: its first line), and what came of it. */
export function closedText(row: QuestionRow): string {
  return `${row.text.length > LONG_QUESTION ? buttonsLine(row) : row.text}\n\n${outcomeLine(row)}`;
}

/** How a question ended, in one line: `✅ Allowed once by …`, `⌛ Expired: …`. */
export function outcomeLine(row: QuestionRow): string {
  let outcome: string;
  if (row.status === 'answered') {
    const by = row.answeredVia === 'api' ? 'via the API' : `by ${row.answeredBy}`;
    if (row.kind === 'approval') {
      outcome = row.answer?.choice === 'deny' ? `🚫 Denied ${by}` : row.answer?.choice === 'always' ? `✅ Always allowed ${by}` : `✅ Allowed once ${by}`;
    } else {
      outcome = `✅ ${row.answer?.label ?? ''} (answered ${by})`;
    }
  } else {
    const what = row.kind === 'approval' ? ` — ${(row.data as { tool?: string } | null)?.tool ?? 'the tool'} did not run` : '';
    outcome = `⌛ Expired: ${row.expiredReason ?? 'no answer in time'}${what}`;
  }
  return outcome;
}

export function view(row: QuestionRow): QuestionView {
  return {
    id: row.id,
    kind: row.kind,
    method: row.method,
    data: row.data,
    text: row.text,
    choices: row.choices,
    persona: row.persona,
    conversationId: row.conversationId,
    chat: row.connector && row.chat ? { connector: row.connector, chat: row.chat, thread: row.thread ?? undefined } : undefined,
    status: row.status,
    expiresAt: row.expiresAt.toISOString(),
    createdAt: row.createdAt.toISOString(),
    answer: row.answer ?? undefined,
    answeredBy: row.answeredBy ?? undefined,
    answeredVia: row.answeredVia ?? undefined,
    expiredReason: row.expiredReason ?? undefined,
  };
}
