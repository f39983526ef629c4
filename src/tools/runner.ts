import { createHash } from 'node:crypto';
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import type { Persona } from '#src/config/persona.ts';
import { databaseUnavailable } from '#src/db/unavailable.ts';
import { sleep } from '#src/retry.ts';
import type { ToolCall, ToolSpec } from '#src/llm/types.ts';
import { listNames, visibleTools } from './catalog.ts';
import { scrubSecrets } from './scrub.ts';
import type { Tool, ToolContext, ToolOutput } from './types.ts';
import type { TurnKind } from '#src/turns.ts';

export const DEFAULT_TOOL_TIMEOUT_MS = 30_000;
const MAX_RESULT_CHARS = 32_000;

/**
 * Whether a call of this tool waits for a person: when the persona lists it under `approve`, and, for a tool that acts
 * on the machine or the world, unless the persona lists it under `allow`.
 */
export function needsApproval(tool: Pick<Tool, 'name' | 'approval' | 'group' | 'server'>, persona: Pick<Persona, 'tools'>): boolean {
  // By name or group; `approve` wins over `allow` (a tool in both asks).
  if (listNames(persona.tools.approve, tool)) return true;
  return Boolean(tool.approval?.byDefault) && !listNames(persona.tools.allow, tool);
}

/** Asks a human before a tool that needs approval runs. Resolves true to run it. */
/** A call's own key (ToolContext.callKey): its turn, the model's id for it and a digest of its arguments. */
function callKey(turnId: string, call: ToolCall): string {
  return `${turnId}/${call.id}/${createHash('sha256').update(call.arguments).digest('base64url').slice(0, 16)}`;
}

/**
 * A call that may run again to no further effect (Tool.resumable) and failed because the database is away (a restart)
 * runs again, more slowly each time, until it succeeds, fails otherwise, or its time or turn ends: a reminder set
 * while Postgres restarts is set, instead of the model being told it failed (and, as often, saying it was set).
 */
async function runWhileDatabaseAway(tool: Tool, args: unknown, ctx: ToolContext): Promise<string | ToolOutput> {
  for (let pause = 250; ; pause = Math.min(pause * 2, 2000)) {
    try {
      return await tool.run(args, ctx);
    } catch (err) {
      if (!databaseUnavailable(err) || ctx.signal.aborted || tool.resumable?.(args as never) !== true) throw err;
      ctx.log.warn({ tool: tool.name, err: (err as Error).message }, 'the database is away; the call runs again when it may be back');
      await sleep(pause, ctx.signal);
    }
  }
}

export type ApprovalGate = (request: { tool: Tool; args: unknown; ctx: ToolContext }) => Promise<{ allowed: boolean; reason?: string }>;

/**
 * Runs tool calls. Every outcome is a string the model can read: the tool's result, or one of
 * `unknown_tool`, `invalid_arguments`, `denied`, `timeout`, `crashed`, `cancelled`. Nothing here throws.
 */
export class ToolRunner {
  private readonly ajv = new Ajv({ allErrors: true, strict: false, coerceTypes: false });
  // Per Tool object, compiled when first called: tools from providers (custom tool folders, MCP servers) come and go
  // while Parlor runs, and a changed tool is a new object with a validator of its own.
  private readonly validators = new WeakMap<Tool, ValidateFunction>();

  constructor(
    private readonly tools: readonly Tool[],
    private readonly approvalGate?: ApprovalGate,
    /** Parlor's own secrets (API keys, tokens): masked in every tool's output, like the persona's. */
    private readonly ownSecrets: readonly string[] = [],
  ) {
    // The fixed tools' schemas are checked at start-up: a bad one is a programmer's error.
    for (const tool of tools) this.validatorFor(tool);
  }

  /** The runner's tools a persona gets in a turn of this kind, as the catalog narrows them (kind, deny, available). */
  toolsFor(persona: Persona, kind: TurnKind): Tool[] {
    return visibleTools(this.tools, { persona, kind });
  }

  specs(tools: readonly Tool[]): ToolSpec[] {
    return tools.map((t) => ({ name: t.name, description: t.description, parameters: t.parameters }));
  }

  /** Whether the call may be run again to no further effect (see Tool.resumable): false when in any doubt. */
  resumable(call: ToolCall, offered: readonly Tool[]): boolean {
    const tool = offered.find((t) => t.name === call.name);
    if (!tool?.resumable) return false;
    try {
      return tool.resumable(call.arguments.trim() ? JSON.parse(call.arguments) : {}) === true;
    } catch {
      return false;
    }
  }

  async execute(call: ToolCall, offered: readonly Tool[], ctx: ToolContext): Promise<ToolOutput> {
    const tool = offered.find((t) => t.name === call.name);
    if (!tool) {
      return { content: `unknown_tool: there is no tool named "${call.name}". Available: ${offered.map((t) => t.name).join(', ') || 'none'}.` };
    }
    let args: unknown;
    try {
      args = call.arguments.trim() ? JSON.parse(call.arguments) : {};
    } catch (err) {
      return {
        content: `invalid_arguments: the arguments are not valid JSON (${(err as Error).message}). Call ${tool.name} again with a JSON object matching its parameters.`,
      };
    }
    let validate: ValidateFunction;
    try {
      validate = this.validatorFor(tool);
    } catch (err) {
      return { content: `crashed: ${tool.name}'s parameters are not a valid JSON Schema (${(err as Error).message}); it cannot be called.` };
    }
    if (!validate(args)) return { content: `invalid_arguments: ${formatAjvErrors(validate.errors)}. Fix the arguments and call ${tool.name} again.` };
    if (ctx.signal.aborted) return { content: 'cancelled: the turn was stopped before this tool ran.' };
    // Refused outright (a catastrophic shell command): nobody is asked to approve it.
    const refused = tool.approval?.refuse?.(args);
    if (refused) return { content: `denied: ${refused}; ${tool.name} did not run.` };

    if (needsApproval(tool, ctx.persona)) {
      if (!this.approvalGate) {
        return { content: `denied: ${tool.name} needs a human's approval and no approval channel is available, so it did not run.` };
      }
      const verdict = await this.approvalGate({ tool, args, ctx }).catch((err: Error) => ({ allowed: false, reason: err.message }));
      if (!verdict.allowed) return { content: `denied: ${tool.name} did not run${verdict.reason ? ` (${verdict.reason})` : ''}.` };
      // The turn may have been stopped while the question was open.
      if (ctx.signal.aborted) return { content: `cancelled: the turn was stopped before ${tool.name} ran.` };
    }
    return this.runWithTimeout(tool, args, ctx, callKey(ctx.turnId, call));
  }

  private validatorFor(tool: Tool): ValidateFunction {
    let validate = this.validators.get(tool);
    if (!validate) {
      validate = this.ajv.compile(tool.parameters);
      this.validators.set(tool, validate);
    }
    return validate;
  }

  private async runWithTimeout(tool: Tool, args: unknown, ctx: ToolContext, key: string): Promise<ToolOutput> {
    const timeoutMs = tool.timeoutMs ?? DEFAULT_TOOL_TIMEOUT_MS;
    const controller = new AbortController();
    let onTurnAbort = () => {};
    type Race = { kind: 'done'; value: string | ToolOutput } | { kind: 'timeout' } | { kind: 'cancelled' } | { kind: 'crashed'; error: unknown };
    // Time spent waiting for a person (a remote method) does not count against the tool's timeout.
    let timer: NodeJS.Timeout | undefined;
    let fireTimeout = () => {};
    let remaining = timeoutMs;
    let armedAt = Date.now();
    let waitingOnPerson = 0;
    const arm = () => {
      armedAt = Date.now();
      timer = setTimeout(() => fireTimeout(), remaining);
    };
    const callCtx: ToolContext = {
      ...ctx,
      callKey: key,
      signal: controller.signal,
      remoteMethod: async (request) => {
        if (waitingOnPerson++ === 0) {
          clearTimeout(timer);
          remaining -= Date.now() - armedAt;
        }
        try {
          return await ctx.remoteMethod({ ...request, signal: request.signal ?? controller.signal });
        } finally {
          if (--waitingOnPerson === 0 && !controller.signal.aborted) arm();
        }
      },
    };
    arm();
    const outcome = await Promise.race<Race>([
      Promise.resolve()
        .then(() => runWhileDatabaseAway(tool, args, callCtx))
        .then(
          (value) => ({ kind: 'done' as const, value }),
          (error: unknown) => ({ kind: 'crashed' as const, error }),
        ),
      new Promise<Race>((resolve) => {
        fireTimeout = () => resolve({ kind: 'timeout' });
      }),
      new Promise<Race>((resolve) => {
        onTurnAbort = () => {
          controller.abort(ctx.signal.reason);
          resolve({ kind: 'cancelled' });
        };
        ctx.signal.addEventListener('abort', onTurnAbort, { once: true });
      }),
    ]);
    clearTimeout(timer);
    ctx.signal.removeEventListener('abort', onTurnAbort);
    if (outcome.kind !== 'done') controller.abort();

    switch (outcome.kind) {
      case 'timeout':
        ctx.log.warn({ tool: tool.name, timeoutMs }, 'tool timed out');
        return { content: `timeout: ${tool.name} did not finish within ${formatDuration(timeoutMs)} and was stopped.` };
      case 'cancelled':
        return { content: `cancelled: the turn was stopped while ${tool.name} was running.` };
      case 'crashed': {
        if (ctx.signal.aborted) return { content: `cancelled: the turn was stopped while ${tool.name} was running.` };
        // One line: a stack or a long nested error (an SDK's) is for the log, not for the model to repeat in a chat.
        const full = outcome.error instanceof Error ? outcome.error.message : String(outcome.error);
        // Masked before it is cut: a secret cut in two would no longer be recognised.
        const first = this.clean(full.trim(), ctx).split('\n')[0] ?? '';
        const detail = first.length > 300 ? `${first.slice(0, 300)}…` : first;
        ctx.log.warn({ tool: tool.name, err: outcome.error }, 'tool crashed');
        return { content: `crashed: ${tool.name} failed: ${detail}` };
      }
      case 'done': {
        const output = typeof outcome.value === 'string' ? { content: outcome.value } : outcome.value;
        return { ...output, content: this.clean(output.content, ctx) };
      }
    }
  }

  private clean(text: string, ctx: ToolContext): string {
    const scrubbed = scrubSecrets(text, [...Object.values(ctx.persona.secrets), ...(ctx.maskSecrets ?? []), ...this.ownSecrets]);
    return scrubbed.length > MAX_RESULT_CHARS
      ? `${scrubbed.slice(0, MAX_RESULT_CHARS)}\n[truncated: ${scrubbed.length - MAX_RESULT_CHARS} more characters]`
      : scrubbed;
  }
}

export function formatAjvErrors(errors: ErrorObject[] | null | undefined): string {
  if (!errors?.length) return 'the arguments do not match the parameters';
  return errors
    .map((e) => {
      const where = e.instancePath || '(arguments)';
      if (e.keyword === 'additionalProperties') return `${where}: unknown property "${(e.params as { additionalProperty: string }).additionalProperty}"`;
      if (e.keyword === 'required') return `${where}: missing required property "${(e.params as { missingProperty: string }).missingProperty}"`;
      if (e.keyword === 'enum') return `${where} must be one of ${(e.params as { allowedValues: unknown[] }).allowedValues.map((v) => JSON.stringify(v)).join(', ')}`;
      return `${where} ${e.message}`;
    })
    .join('; ');
}

function formatDuration(ms: number): string {
  return ms % 1000 === 0 ? `${ms / 1000}s` : `${ms}ms`;
}
