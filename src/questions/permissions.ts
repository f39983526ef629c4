// Who may answer a question, and what an API result means.
import type { InboundEvent } from '#src/connector.ts';
import type { Persona } from '#src/config/persona.ts';
import type { QuestionAnswer, QuestionRow } from '#src/db/questions.ts';
import type { Choice } from './format.ts';

/**
 * A click counts from the owner at the terminal, the persona's approvers, and (not for approvals) the person asked,
 * or any of the persona's users when nobody in particular was asked.
 */
export function mayAnswerClick(row: QuestionRow, event: InboundEvent, personas: readonly Persona[]): boolean {
  if (event.trusted) return true;
  const persona = personas.find((p) => p.name === row.persona);
  if (!persona) return false;
  const address = `${event.connector}:${event.sender.id}`;
  if (persona.approvers.includes(address)) return true;
  if (row.approversOnly) return false;
  if (row.askedUser) return row.askedUser === address;
  return persona.users.includes(address);
}

/**
 * A typed message answers a question only from the person it was asked of; when nobody in particular was asked,
 * a persona user in a DM, or in a group only as a reply to the bot. Approvals only ever from an approver.
 */
export function mayAnswerByTyping(row: QuestionRow, event: InboundEvent, personas: readonly Persona[]): boolean {
  if (event.trusted) return true;
  const address = `${event.connector}:${event.sender.id}`;
  // An approval is the approvers' to answer, whoever asked for the tool.
  if (row.approversOnly) return mayAnswerClick(row, event, personas) && (event.chat.type === 'dm' || Boolean(event.replyToBot));
  if (row.askedUser) return row.askedUser === address;
  if (event.chat.type === 'group' && !event.replyToBot) return false;
  return mayAnswerClick(row, event, personas);
}

/** An API result: a choice's value (or its label, or its id), or any value when there are no choices. */
export function answerForResult(choices: Choice[], result: unknown): QuestionAnswer | { error: string } {
  if (choices.length === 0) {
    if (result === undefined) return { error: 'result is required' };
    return { label: typeof result === 'string' ? result : JSON.stringify(result), value: result };
  }
  // A value is matched before a label, and a label before a choice id, so "1" never means another choice's value.
  const choice =
    choices.find((c) => c.value !== undefined && JSON.stringify(c.value) === JSON.stringify(result)) ??
    choices.find((c) => c.label === result) ??
    choices.find((c) => c.id === result);
  if (!choice) return { error: `result must be one of: ${choices.map((c) => JSON.stringify(c.value ?? c.id)).join(', ')}` };
  return { choice: choice.id, label: choice.label, value: choice.value };
}
