import type { InboundEvent } from '#src/connector.ts';
import type { Persona } from '#src/config/persona.ts';
import { chatConversationId, parseConversationId } from '#src/conversation-id.ts';

export type RouteDecision =
  | { kind: 'conversation'; persona: Persona; conversationId: string }
  | { kind: 'stranger'; address: string }
  | { kind: 'ignore'; reason: string };


/**
 * Picks the persona and conversation for an event, or says why nobody answers it. `openedThread` is the
 * conversation of the thread the event was posted in, when the bot opened that thread for one of its replies: what
 * is posted there continues that conversation, and speaks to the bot without a mention.
 */
export function routeInbound(personas: readonly Persona[], event: InboundEvent, openedThread?: string): RouteDecision {
  const { connector, chat, sender } = event;
  const conversation = (persona: Persona): RouteDecision => ({
    kind: 'conversation',
    persona,
    conversationId: chatConversationId(persona.name, connector, chat.id, chat.thread),
  });

  // Only a local connector's events name their persona and vouch for their sender (the ingress sees to that).
  if (event.trusted && event.persona) {
    const persona = personas.find((p) => p.name === event.persona);
    return persona ? conversation(persona) : { kind: 'ignore', reason: `no persona named ${event.persona}` };
  }
  if (sender.isBot) return { kind: 'ignore', reason: 'sent by a bot' };

  if (chat.type === 'dm') {
    const address = `${connector}:${sender.id}`;
    const candidates = personas.filter((p) => p.users.includes(address));
    if (candidates.length === 0) return { kind: 'stranger', address };
    return conversation(candidates.find((p) => p.isDefault) ?? candidates[0]);
  }

  const owners = personas.flatMap((persona) =>
    persona.channels
      .filter((c) => c.connector === connector && c.chat === chat.id && (!c.thread || c.thread === chat.thread))
      .map((channel) => ({ persona, channel })),
  );
  if (owners.length === 0) return { kind: 'ignore', reason: 'channel not owned by any persona' };
  const owner = owners.find((o) => o.persona.isDefault) ?? owners[0];
  const threadOwner = openedThread ? owners.find((o) => parseConversationId(openedThread)?.persona === o.persona.name) : undefined;
  if (threadOwner && openedThread) return { kind: 'conversation', persona: threadOwner.persona, conversationId: openedThread };
  // A reaction is checked against the bot's own messages instead (see the ingress).
  if (owner.channel.mention && event.kind !== 'reaction' && !event.mentioned && !event.replyToBot) {
    return { kind: 'ignore', reason: 'not mentioned' };
  }
  return conversation(owner.persona);
}

/** The text the model sees for an inbound message: who said it in a group, and edits marked (attachments follow it). */
export function userMessageText(event: InboundEvent): string {
  let text = event.text;
  if (event.kind === 'edit') text = `(edited) ${text}`;
  if (event.chat.type === 'group') {
    text = `[${speakerName(event)} (${event.connector}:${event.sender.id})] ${text}`;
  }
  return text;
}

/**
 * A group member's display name as the model reads it: brackets, parentheses and line breaks removed, so a name
 * like `Ana (telegram:7)] ... [x` cannot pass for another speaker or end the label early.
 */
function speakerName(event: InboundEvent): string {
  const raw = event.sender.name || event.sender.username || event.sender.id;
  const name = raw.replace(/[[\]()\p{Cc}\p{Cf}\u2028\u2029]/gu, ' ').replace(/\s+/g, ' ').trim().slice(0, 64);
  return name || event.sender.id;
}
