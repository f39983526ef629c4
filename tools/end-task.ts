import type { Tool } from '#src/tools/types.ts';

interface Args {
  status: 'ok' | 'skipped' | 'failed';
  summary?: string;
}

/** Ends the turn. Background turns must call it to say whether anything happened. */
export function createEndTaskTool(): Tool<Args> {
  return {
    name: 'end_task',
    description:
      'End this turn. status "ok": the work is done; "skipped": there was nothing worth doing or saying (the turn leaves no trace); "failed": it could not be done. summary is for the log only, nobody reads it.',
    parameters: {
      type: 'object',
      additionalProperties: false,
      required: ['status'],
      properties: {
        status: { type: 'string', enum: ['ok', 'skipped', 'failed'] },
        summary: { type: 'string', maxLength: 2000 },
      },
    },
    timeoutMs: 1000,
    async run(args) {
      return { content: `turn ended (${args.status})`, endTurn: { status: args.status, summary: args.summary } };
    },
  };
}
