import type { Tool, ToolContext } from '#src/tools/types.ts';
import { explicitTarget, originTarget, turnChat } from '#src/tools/targets.ts';
import { OUTGOING_RETENTION_MS, privateOutgoingDir, pruneOutgoingFiles, snapshotWorkspaceFile } from '#src/tools/outgoing-files.ts';
import { resolveWorkspaceFile } from '#src/tools/workspace.ts';
import type { DeliveryResult, DeliveryTarget } from '#src/turns.ts';

interface Args {
  text: string;
  connector?: string;
  to?: string;
  thread?: string;
  files?: string[];
  dry_run?: boolean;
}

const MAX_FILE_BYTES = 50 * 1024 * 1024;
const SWEEP_EVERY_MS = 3600_000;

export interface SendMessageOptions {
  /**
   * Where copies of the files to send are kept until they are sent: a folder no command can see (Parlor's home
   * hides it from the sandbox). Default: a private temporary folder of this process.
   */
  outgoingDir?: string;
  /** Every persona's folder: files in another persona's are refused (see src/tools/workspace.ts). */
  personaDirs?: readonly string[];
}

/**
 * Sends a message now: to an explicit chat, else the chat this turn came from, else (background turns) the
 * persona's primary. Only chats the persona belongs to are allowed.
 */
export function createSendMessageTool(options: SendMessageOptions = {}): Tool<Args> {
  let outgoing: Promise<string> | undefined;
  let sweptAt = 0;
  /** The folder for copies; old copies are swept from it now and then (an hour apart at most). */
  const outgoingDir = async (log: ToolContext['log']): Promise<string> => {
    outgoing ??= options.outgoingDir ? Promise.resolve(options.outgoingDir) : privateOutgoingDir();
    const dir = await outgoing;
    if (Date.now() - sweptAt > SWEEP_EVERY_MS) {
      sweptAt = Date.now();
      void pruneOutgoingFiles(dir, new Date(Date.now() - OUTGOING_RETENTION_MS)).catch((err: unknown) =>
        log.warn({ err, tool: 'send_message' }, 'old copies of sent files could not be removed'),
      );
    }
    return dir;
  };
  return {
    name: 'send_message',
    description:
      'Send a message to a chat now. With no connector/to it goes to the current chat, or in a scheduled turn to your primary chat. ' +
      'connector is e.g. "telegram"; to is the chat id. files are paths in your workspace to send, with text as their caption. ' +
      'dry_run checks the destination without sending.',
    parameters: {
      type: 'object',
      additionalProperties: false,
      required: ['text'],
      properties: {
        text: { type: 'string', minLength: 1, maxLength: 40_000 },
        connector: { type: 'string', minLength: 1 },
        to: { type: 'string', minLength: 1 },
        thread: { type: 'string', minLength: 1 },
        files: { type: 'array', items: { type: 'string', minLength: 1 }, maxItems: 10 },
        dry_run: { type: 'boolean' },
      },
    },
    timeoutMs: 150_000,
    // A text is keyed by the turn and itself in the ledger: run again, it goes out if it did not, and never twice. Files
    // are copied afresh each time, under new names.
    resumable: (args) => !args.files?.length,
    async run(args, ctx) {
      const target = resolveTarget(args, ctx);
      if ('error' in target) return `error: ${target.error}`;
      const where = `${target.connector}:${target.chat}${target.thread ? `:${target.thread}` : ''}`;
      let files: string[] | undefined;
      try {
        if (args.dry_run) {
          files = args.files && (await Promise.all(args.files.map((f) => resolveWorkspaceFile(ctx.persona, f, { maxBytes: MAX_FILE_BYTES, personaDirs: options.personaDirs }))));
        } else if (args.files) {
          // Copied now, while checked: the connector opens the copy, never the workspace path (see outgoing-files.ts).
          const dir = await outgoingDir(ctx.log);
          files = await Promise.all(args.files.map((f) => snapshotWorkspaceFile(ctx.persona, f, { outgoingDir: dir, maxBytes: MAX_FILE_BYTES, personaDirs: options.personaDirs })));
        }
      } catch (err) {
        return `error: ${(err as Error).message}`;
      }
      if (args.dry_run) {
        return `dry run: would send ${args.text.length} characters${files ? ` and ${files.length} file(s)` : ''} to ${where}; nothing was sent`;
      }
      const result = await ctx.deliver(target, args.text, files ? { files } : undefined);
      return deliveryOutcome(result, where, 'the same message was already sent');
    },
  };
}

function resolveTarget(args: Args, ctx: ToolContext): DeliveryTarget | { error: string } {
  const { persona, origin } = ctx;
  if (args.to) {
    const connector = args.connector ?? origin?.connector ?? persona.primary?.connector;
    if (!connector) return { error: 'name the connector (e.g. "telegram") along with to' };
    return explicitTarget(ctx, { connector, chat: args.to, thread: args.thread });
  }
  if (args.connector) return { error: 'to (the chat id) is required when connector is given' };
  const fallback = turnChat(ctx.kind, origin, persona) ?? (origin && originTarget(origin));
  if (fallback) return fallback;
  return { error: 'no destination: give connector and to, or set "primary" in connectors.jsonc' };
}

/** What a send tool tells the model about a delivery. */
export function deliveryOutcome(result: DeliveryResult, where: string, duplicate: string): string {
  switch (result.status) {
    case 'sent':
      return `sent to ${where}`;
    case 'queued':
      return `queued for ${where}`;
    case 'duplicate':
      return `ok: ${duplicate} to ${where} in this turn; not sent again`;
    case 'failed':
      return `error: could not send to ${where}: ${result.error}`;
  }
}
