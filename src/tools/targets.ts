import { isPersonaChat, type Persona } from '#src/config/persona.ts';
import type { ToolContext } from './types.ts';
import type { DeliveryTarget, Origin, TurnKind } from '#src/turns.ts';

/** The persona's primary chat as a delivery target, when it has one. */
export function primaryTarget(persona: Persona | undefined): DeliveryTarget | undefined {
  const primary = persona?.primary;
  return primary && { connector: primary.connector, chat: primary.to, thread: primary.thread };
}

/** The chat a turn came from, as a delivery target. */
export function originTarget(origin: Origin): DeliveryTarget {
  return { connector: origin.connector, chat: origin.chat, thread: origin.thread };
}

/**
 * Where a turn asks a person: a user turn in its own chat (a task in the chat it works for), a background turn in
 * the persona's primary.
 */
export function turnChat(kind: TurnKind, origin: Origin | undefined, persona: Persona): DeliveryTarget | undefined {
  return (kind === 'user' || kind === 'task') && origin ? originTarget(origin) : primaryTarget(persona);
}

/**
 * Whether the turn may send to a chat: its own chat, else one of the persona's chats. In a group anyone may talk to
 * the persona; only its own people may have it post elsewhere, now or in a reminder or wake-up they set there.
 */
export function isAllowed(persona: Persona, target: DeliveryTarget, ctx: Pick<ToolContext, 'origin'>): boolean {
  const { origin } = ctx;
  if (origin && origin.connector === target.connector && origin.chat === target.chat) return true;
  if (origin?.chatType === 'group') {
    const sender = origin.sender ?? '';
    if (!persona.users.includes(sender) && !persona.approvers.includes(sender)) return false;
  }
  return isPersonaChat(persona, target);
}

/** A chat a tool was told to use: its connector must run in this deployment, and the turn must be allowed to it. */
export function explicitTarget(ctx: ToolContext, target: DeliveryTarget): DeliveryTarget | { error: string } {
  if (!ctx.connectorIds().includes(target.connector)) return { error: `no connector named "${target.connector}" is configured` };
  return isAllowed(ctx.persona, target, ctx)
    ? target
    : { error: `${target.connector}:${target.chat} is not one of your chats (users, channels or primary in connectors.jsonc)` };
}
