import type { Queryable } from '#src/db/client.ts';
import { historySince, type HistoryRead } from '#src/db/messages.ts';
import type { ChatMessage } from '#src/llm/types.ts';
import { fitWindow, messageSize, repairToolPairs, type HistoryBudget } from './history.ts';

export interface StoredMessage {
  id: number;
  message: ChatMessage;
}

/**
 * The window starts afresh when what it keeps passes this share of the budget (in characters or in messages): the
 * rest of the budget is room for the summary to be written before the window must move.
 */
export const STEP_AT = 0.85;
/** ... and then keeps only this share, so the next turns add to an unchanged start for a good while. */
export const KEEP = 0.4;

/**
 * Where the window may start, as the ids it starts after, oldest first. Walking from the first message, whenever
 * the part kept since the last start passes STEP_AT of the budget, the start jumps forward at once to the first user
 * message from which at most KEEP of the budget is kept. The steps depend only on the messages after the walk's
 * start, so a walk begun at an earlier step (where the stored summary ends) finds the same later steps, and every
 * turn between two steps sends the same start.
 */
export function windowSteps(rows: readonly StoredMessage[], budget: HistoryBudget): number[] {
  const sizes = rows.map((r) => messageSize(r.message));
  const steps: number[] = [];
  let start = 0;
  let chars = 0;
  for (let i = 0; i < rows.length; i++) {
    chars += sizes[i];
    if (chars <= budget.maxChars * STEP_AT && i + 1 - start <= budget.maxMessages * STEP_AT) continue;
    // The earliest user message after the start from which the kept part is small enough; else the latest one.
    let next = -1;
    let tail = chars;
    for (let j = start; j <= i; j++) {
      if (j > start && rows[j].message.role === 'user') {
        next = j;
        if (tail <= budget.maxChars * KEEP && i + 1 - j <= budget.maxMessages * KEEP) break;
      }
      tail -= sizes[j];
    }
    if (next < 0) continue;
    steps.push(rows[next - 1].id);
    chars = 0;
    for (let j = next; j <= i; j++) chars += sizes[j];
    start = next;
  }
  return steps;
}

export interface WindowPlan {
  /** The messages the model sees, from the window's start. */
  rows: StoredMessage[];
  /** The newest step the walk found, when there is one: the summary should cover the messages up to it. */
  summariseThrough?: number;
}

/**
 * The window of a turn: from the walk's start (where the stored summary ends) while it fits the budget, else from the
 * first step after which it does. Between steps the start does not move, so consecutive requests share their prefix.
 */
export function planWindow(rows: readonly StoredMessage[], budget: HistoryBudget): WindowPlan {
  const steps = windowSteps(rows, budget);
  const starts = [0, ...steps.map((id) => rows.findIndex((r) => r.id === id) + 1)];
  let chars = rows.reduce((n, r) => n + messageSize(r.message), 0);
  let at = 0;
  for (let k = 0; k < starts.length; k++) {
    for (; at < starts[k]; at++) chars -= messageSize(rows[at].message);
    if ((chars <= budget.maxChars && rows.length - at <= budget.maxMessages) || k === starts.length - 1) break;
  }
  return { rows: rows.slice(at), summariseThrough: steps.at(-1) };
}

/** The summary's share of the budget at most; the window has the rest. */
export const SUMMARY_SHARE = 0.1;
/** How many stored messages one walk reads, at most: several windows' worth, in case summaries fall behind. */
const WALK_ROWS = 4;

export const SUMMARY_NOTE = '[Parlor] Summary of the earlier conversation (its messages are no longer shown):';

export interface HistoryWindow {
  /** The summary note (when there is a summary) and the window, ending with what started the turn. */
  messages: ChatMessage[];
  /** Set when the window has stepped past the stored summary: the messages up to this id should be summarised. */
  summariseThrough?: number;
  /** Where the summary to extend ends (or where the conversation starts afresh, without one). */
  summarisedThrough: number;
}

/** How many stored messages one walk reads, for a budget: see WALK_ROWS. */
export const historyReadLimit = (budget: HistoryBudget) => budget.maxMessages * WALK_ROWS;

/**
 * The part of a conversation the model sees: the stored summary of what came before, then the newest messages from
 * a start that moves in steps (see windowSteps), beginning at a user message so no tool result loses its call. The
 * cost is bounded however long the conversation is, and a turn never waits for a summary to be written. `read` is
 * the history already read (historyReadLimit messages after `afterId`), else it is read here.
 */
export async function loadHistoryWindow(db: Queryable, conversationId: string, afterId: number, budget: HistoryBudget, read?: HistoryRead): Promise<HistoryWindow> {
  const room = { maxChars: Math.floor(budget.maxChars * (1 - SUMMARY_SHARE)), maxMessages: budget.maxMessages - 1 };
  const { summary, rows } = read ?? (await historySince(db, conversationId, { afterId, limit: historyReadLimit(budget) }));
  const from = summary?.throughMessageId ?? afterId;
  const plan = planWindow(rows, room);
  const window = fitWindow(repairToolPairs(plan.rows.map((r) => r.message)), room.maxChars);
  const note: ChatMessage[] = summary ? [{ role: 'user', content: `${SUMMARY_NOTE}\n${summary.summary}` }] : [];
  return { messages: [...note, ...window], summariseThrough: plan.summariseThrough, summarisedThrough: from };
}

/** Asks for the conversation to be summarised up to a step of its window (a job; the turn does not wait for it). */
export type SummaryRequest = (request: { persona: string; conversationId: string; throughMessageId: number }) => Promise<void>;
