import { parseConversationId } from '#src/conversation-id.ts';
import type { Persona } from '#src/config/persona.ts';
import type { Queryable } from '#src/db/client.ts';
import { hasToolGrant } from '#src/db/questions.ts';
import type { ApprovalGate } from '#src/tools/runner.ts';
import { originTarget, primaryTarget } from '#src/tools/targets.ts';
import type { ToolContext } from '#src/tools/types.ts';
import type { Choice } from './format.ts';
import { describeCallWhole } from './summary.ts';
import { RemoteMethodCancelled, RemoteMethodTimeout, type WaitForAnswer } from './waiting.ts';
import type { DeliveryTarget } from '#src/turns.ts';

const DEFAULT_APPROVAL_TIMEOUT_MS = 300_000;
/** Longest account of a call a person is asked to review; a longer call is refused, never shown cut. */
export const MAX_APPROVAL_TEXT = 12_000;

const APPROVAL_CHOICES: Choice[] = [
  { id: 'once', label: 'Allow once' },
  { id: 'always', label: 'Always allow' },
  { id: 'deny', label: 'Deny' },
];

/** The approval question: who wants to run which tool (and who asked, when elsewhere), then the call as shown. */
export function approvalText(ask: { persona: string; tool: string; askedBy?: string; summary: string }): string {
  return `🔐 ${ask.persona} wants to run ${ask.tool}${ask.askedBy ? ` (asked by ${ask.askedBy})` : ''}\n${ask.summary}`;
}

/**
 * Where an approval is asked: where an approver sees it. The turn's own chat when the person who asked may approve
 * (or is the local owner); else the persona's primary chat; else the first approver's DM. `askedBy` names the
 * person who asked when the question goes elsewhere.
 */
export function approvalDestination(ctx: Pick<ToolContext, 'persona' | 'kind' | 'origin' | 'conversationId'>): { destination?: DeliveryTarget; askedBy?: string } {
  const { persona, origin } = ctx;
  // A task asks in the chat it works for (where its parent turn was), naming itself.
  const task = ctx.kind === 'task' ? parseConversationId(ctx.conversationId) : undefined;
  const by = task?.kind === 'subagent' ? `subagent ${task.handle}` : undefined;
  if ((ctx.kind === 'user' || ctx.kind === 'task') && origin) {
    if (origin.trusted || (origin.sender && persona.approvers.includes(origin.sender))) return { destination: originTarget(origin), askedBy: by };
    const askedBy = `${by ? `${by} for ` : ''}${origin.sender ?? 'someone'} in ${origin.connector}:${origin.chat}`;
    return { destination: primaryTarget(persona) ?? approverDm(persona), askedBy };
  }
  if (by) return { destination: primaryTarget(persona) ?? approverDm(persona), askedBy: by };
  return { destination: primaryTarget(persona) ?? approverDm(persona) };
}

/** A DM with the first approver: their user id is the chat a DM to them goes to. */
function approverDm(persona: Persona): DeliveryTarget | undefined {
  const address = persona.approvers[0];
  if (!address) return undefined;
  const split = address.indexOf(':');
  return { connector: address.slice(0, split), chat: address.slice(split + 1) };
}

/**
 * Tool approvals: a remote method with Allow once / Always allow / Deny, asked of the persona's approvers where they
 * see it. The call is shown whole; one too long to show is refused. A standing "Always allow" grant skips the
 * question; a timeout or a stop is a deny.
 */
export function createApprovalGate(deps: { db: Queryable; waitForAnswer: WaitForAnswer }): ApprovalGate {
  return async ({ tool, args, ctx }) => {
    // `*` grants the whole tool; a tool's own scope is kept apart from it, so no call can pass for `*`.
    const scope = tool.approval?.scope ? `call:${tool.approval.scope(args)}` : '*';
    if (await hasToolGrant(deps.db, { persona: ctx.persona.name, tool: tool.name, scope })) return { allowed: true };
    const { persona } = ctx;
    const { destination, askedBy } = approvalDestination(ctx);
    if (!destination) return { allowed: false, reason: 'there is no chat to ask an approver in; set "primary" or "approvers" in connectors.jsonc' };
    const summary = tool.approval?.summary?.(args) ?? describeCallWhole(args);
    if (summary.length > MAX_APPROVAL_TEXT) {
      return {
        allowed: false,
        reason: `the call is ${summary.length} characters long as shown, over the ${MAX_APPROVAL_TEXT} a person can be asked to review; split it into smaller steps`,
      };
    }
    try {
      const row = await deps.waitForAnswer(ctx, {
        kind: 'approval',
        method: 'approve',
        data: { tool: tool.name, scope, args },
        text: approvalText({ persona: persona.name, tool: tool.name, askedBy, summary }),
        choices: APPROVAL_CHOICES,
        timeoutMs: (persona.tools.approvalTimeoutSeconds ?? 0) * 1000 || DEFAULT_APPROVAL_TIMEOUT_MS,
        destination,
        approversOnly: true,
      });
      const choice = row.answer?.choice;
      if (choice === 'once' || choice === 'always') return { allowed: true };
      return { allowed: false, reason: `denied by ${row.answeredBy}` };
    } catch (err) {
      if (err instanceof RemoteMethodTimeout) return { allowed: false, reason: 'nobody approved it in time' };
      if (err instanceof RemoteMethodCancelled) return { allowed: false, reason: err.message };
      throw err;
    }
  };
}
