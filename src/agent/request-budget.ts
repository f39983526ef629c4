import type { ChatMessage } from '#src/llm/types.ts';
import { messageSize, type HistoryBudget } from './history.ts';

/**
 * Everything a turn has in hand before a model call: the history window it began with, then what it added. All of
 * it is stored; only what is sent to the model is bounded.
 */
export interface TurnMessages {
  messages: readonly ChatMessage[];
  /** The turn's own opening messages are `messages[start, end)`: always sent. What is before them is earlier history. */
  opening: { start: number; end: number };
  /** User messages that arrived while the turn ran. */
  inbox: ReadonlySet<ChatMessage>;
}

/**
 * The history is the exchanges before the turn; a step is one assistant message with its tool results, which are
 * kept or left out together because providers reject a call without its result.
 */
interface Part {
  kind: 'history' | 'opening' | 'step' | 'inbox' | 'kept';
  messages: ChatMessage[];
}

/** An older step's call arguments or text past these lengths are shortened once the request is over budget. */
const LONG_ARGUMENTS = 1_000;
const LONG_TEXT = 2_000;
/** Room kept for the note that says how many arrived messages are left out. */
const NOTE_ROOM = 160;
/** The part of the budget kept for messages that arrived mid-turn, however large the rest. */
const ARRIVED_SHARE = 0.25;
/** Below this, a message cut to fit would say too little to be worth showing. */
const SMALLEST_CUT = 500;

/**
 * The messages of the next model request, within the budget however much the turn has gathered. Over budget, what
 * goes first is earlier history (whole exchanges, oldest first), then the results of this turn's older steps
 * (replaced by a placeholder, the call kept), then the oldest of the messages that arrived mid-turn (a note says how
 * many). The opening and the newest step's results stay; they are cut short only when they alone exceed the budget.
 */
export function fitRequestToBudget(turn: TurnMessages, budget: HistoryBudget): ChatMessage[] {
  let size = turn.messages.reduce((n, m) => n + messageSize(m), 0);
  let arrived = 0;
  for (const m of turn.messages) if (turn.inbox.has(m)) arrived++;
  if (size <= budget.maxChars && arrived <= budget.maxMessages) return [...turn.messages];

  const parts = splitIntoParts(turn);
  const over = () => size > budget.maxChars;
  const newest = parts.findLast((p) => p.kind === 'step' && p.messages.length > 1);

  while (over()) {
    const i = parts.findIndex((p) => p.kind === 'history');
    if (i < 0) break;
    size -= partSize(parts[i]);
    parts.splice(i, 1);
  }
  for (const part of parts) {
    if (!over()) break;
    if (part.kind === 'step' && part !== newest) size -= elideStep(part);
  }
  size = fitArrived(parts, size, budget);

  // Last resort: an older step the model took goes whole (its call with its results), with a word that it happened.
  let droppedSteps = 0;
  for (let i = 0; i < parts.length && over(); ) {
    if (parts[i].kind === 'step' && parts[i] !== newest) {
      size -= partSize(parts[i]);
      parts.splice(i, 1);
      droppedSteps++;
    } else i++;
  }
  if (droppedSteps > 0) {
    const note: ChatMessage = { role: 'user', content: `[Parlor] ${plural(droppedSteps, 'earlier step')} of this turn ${droppedSteps === 1 ? 'is' : 'are'} left out to fit the context.` };
    const at = parts.findIndex((p) => p.kind !== 'history' && p.kind !== 'opening');
    parts.splice(at < 0 ? parts.length : at, 0, { kind: 'kept', messages: [note] });
    size += messageSize(note);
  }
  if (over() && newest) size = cutToShare(newest, (m) => m.role === 'tool', size, budget.maxChars);
  const opening = parts.find((p) => p.kind === 'opening');
  if (over() && opening) size = cutToShare(opening, (m) => m.role === 'user', size, budget.maxChars);
  return parts.flatMap((p) => p.messages);
}

function splitIntoParts({ messages, opening, inbox }: TurnMessages): Part[] {
  const parts: Part[] = [];
  for (let i = 0; i < messages.length; i++) {
    const m = messages[i];
    const last = parts.at(-1);
    if (i < opening.start) {
      // A history exchange starts at a user message, so what remains of the history still starts at one.
      if (m.role === 'user' || !last) parts.push({ kind: 'history', messages: [m] });
      else last.messages.push(m);
    } else if (i < opening.end) {
      if (last?.kind === 'opening') last.messages.push(m);
      else parts.push({ kind: 'opening', messages: [m] });
    } else if (m.role === 'tool' && last?.kind === 'step') {
      last.messages.push(m);
    } else if (m.role === 'assistant') {
      parts.push({ kind: 'step', messages: [m] });
    } else {
      parts.push({ kind: inbox.has(m) ? 'inbox' : 'kept', messages: [m] });
    }
  }
  return parts;
}

/** Shortens an older step in place (with new message objects: the stored ones are never changed); returns what it saved. */
function elideStep(part: Part): number {
  const before = partSize(part);
  part.messages = part.messages.map((m) => {
    if (m.role === 'tool') {
      const placeholder = `[result of ${m.name} omitted to fit the context: ${m.content.length} characters]`;
      return placeholder.length < m.content.length ? { ...m, content: placeholder } : m;
    }
    if (m.role !== 'assistant') return m;
    const content = m.content.length > LONG_TEXT ? cut(m.content, LONG_TEXT) : m.content;
    const toolCalls = m.toolCalls?.map((c) =>
      c.arguments.length > LONG_ARGUMENTS ? { ...c, arguments: JSON.stringify({ omitted: `${c.arguments.length} characters of arguments, to fit the context` }) } : c,
    );
    return { ...m, content, ...(toolCalls ? { toolCalls } : {}) };
  });
  return before - partSize(part);
}

/** Keeps the newest arrived messages that fit (in characters and in number), after a note saying how many are left out. */
function fitArrived(parts: Part[], size: number, budget: HistoryBudget): number {
  const at = parts.flatMap((p, i) => (p.kind === 'inbox' ? [i] : []));
  if (at.length === 0) return size;
  const sizes = at.map((i) => partSize(parts[i]));
  const arrivedSize = sizes.reduce((a, b) => a + b, 0);
  const fixed = size - arrivedSize;
  if (size <= budget.maxChars && at.length <= budget.maxMessages) return size;

  // What the people in the chat said keeps a share even when the rest is too big: the rest can still be cut below.
  const room = Math.max(budget.maxChars - fixed, Math.floor(budget.maxChars * ARRIVED_SHARE)) - NOTE_ROOM;
  let shown = 0;
  let used = 0;
  while (shown < at.length && shown < budget.maxMessages && used + sizes[at.length - 1 - shown] <= room) used += sizes[at.length - 1 - shown++];
  if (shown === 0 && room >= SMALLEST_CUT) {
    // The newest message alone is too long: it is shown cut, as the history window does with an oversize message.
    const newest = parts[at[at.length - 1]];
    newest.messages = newest.messages.map((m) => ({ ...m, content: cut(m.content, room) }));
    used = partSize(newest);
    shown = 1;
  }
  const left = at.length - shown;
  const note: ChatMessage = {
    role: 'user',
    content:
      shown > 0
        ? `[Parlor] ${plural(left, 'more message')} arrived while you were working; only the latest ${shown} ${shown === 1 ? 'is' : 'are'} shown.`
        : `[Parlor] ${plural(left, 'message')} arrived while you were working; none fit in the context, so none are shown.`,
  };
  const dropped = new Set(at.slice(0, left));
  const noteAt = shown > 0 ? at[left] : at[at.length - 1];
  const kept: Part[] = [];
  parts.forEach((part, i) => {
    if (i === noteAt) kept.push({ kind: 'kept', messages: [note] });
    if (!dropped.has(i)) kept.push(part);
  });
  parts.splice(0, parts.length, ...kept);
  return fixed + used + messageSize(note);
}

/** Cuts the chosen messages of a part to an equal share of what the rest of the request leaves. */
function cutToShare(part: Part, chosen: (m: ChatMessage) => boolean, size: number, maxChars: number): number {
  const targets = part.messages.filter(chosen);
  if (targets.length === 0) return size;
  const theirs = targets.reduce((n, m) => n + messageSize(m), 0);
  const share = Math.max(SMALLEST_CUT, Math.floor((maxChars - (size - theirs)) / targets.length));
  const before = partSize(part);
  part.messages = part.messages.map((m) => (chosen(m) && m.content.length > share ? ({ ...m, content: cut(m.content, share) } as ChatMessage) : m));
  return size - before + partSize(part);
}

/** The start of a text, within `max` characters including the line that says how much was cut. */
function cut(text: string, max: number): string {
  const marker = (n: number) => `\n[… ${n} more characters cut to fit the context]`;
  const keep = Math.max(0, max - marker(text.length).length);
  return text.slice(0, keep) + marker(text.length - keep);
}

function partSize(part: Part): number {
  return part.messages.reduce((n, m) => n + messageSize(m), 0);
}

function plural(n: number, noun: string): string {
  return `${n} ${noun}${n === 1 ? '' : 's'}`;
}
