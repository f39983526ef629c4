import type { Queryable } from '#src/db/client.ts';
import { hasToolGrant } from '#src/db/questions.ts';
import type { ApprovalGate } from '#src/tools/runner.ts';
import { turnChat } from '#src/tools/targets.ts';
import type { Choice } from './format.ts';
import { summarizeArgs } from './summary.ts';
import { RemoteMethodCancelled, RemoteMethodTimeout, type WaitForAnswer } from './waiting.ts';

const DEFAULT_APPROVAL_TIMEOUT_MS = 300_000;

const APPROVAL_CHOICES: Choice[] = [
  { id: 'once', label: 'Allow once' },
  { id: 'always', label: 'Always allow' },
  { id: 'deny', label: 'Deny' },
];

/**
 * Tool approvals: a remote method with Allow once / Always allow / Deny, asked of the persona's approvers in the
 * turn's chat (the primary for background turns). A standing "Always allow" grant skips the question; a timeout
 * or a stop is a deny.
 */
export function createApprovalGate(deps: { db: Queryable; waitForAnswer: WaitForAnswer }): ApprovalGate {
  return async ({ tool, args, ctx }) => {
    // `*` grants the whole tool; a tool's own scope is kept apart from it, so no call can pass for `*`.
    const scope = tool.approval?.scope ? `call:${tool.approval.scope(args)}` : '*';
    if (await hasToolGrant(deps.db, { persona: ctx.persona.name, tool: tool.name, scope })) return { allowed: true };
    const { persona } = ctx;
    const destination = turnChat(ctx.kind, ctx.origin, persona);
    if (!destination) return { allowed: false, reason: 'there is no chat to ask for approval in; set "primary" in connectors.jsonc' };
    const summary = tool.approval?.summary?.(args) ?? summarizeArgs(args);
    try {
      const row = await deps.waitForAnswer(ctx, {
        kind: 'approval',
        method: 'approve',
        data: { tool: tool.name, scope, args },
        text: `🔐 ${persona.name} wants to run ${tool.name}\n${summary}`,
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
