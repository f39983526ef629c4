import type { ProcessRegistry } from '#src/tools/processes.ts';
import type { Tool } from '#src/tools/types.ts';

interface Args {
  action: 'status' | 'list' | 'read' | 'write' | 'signal' | 'remove';
  id?: string;
  since?: number;
  data?: string;
  eof?: boolean;
  signal?: 'SIGTERM' | 'SIGINT' | 'SIGHUP' | 'SIGKILL' | 'SIGUSR1' | 'SIGUSR2';
}

/** The commands shell_exec left running in the background of this conversation. */
export function createProcessTool(processes: ProcessRegistry): Tool<Args> {
  return {
    name: 'process',
    description:
      'Manage the commands shell_exec left running in the background of this conversation (bg_… handles). ' +
      'list: all of them. status: one. read: its output from byte offset since (older output may be dropped: dropped_bytes says how much). ' +
      'write: send data to its stdin (only for a command started with background=true; eof=true closes it). ' +
      'signal: send a signal to it and everything it started (SIGTERM, the default, stops it). remove: stop it if needed and forget it (no message when it ends). ' +
      'When one exits you get a message in this conversation by itself; there is no need to poll.',
    parameters: {
      type: 'object',
      additionalProperties: false,
      required: ['action'],
      properties: {
        action: { enum: ['status', 'list', 'read', 'write', 'signal', 'remove'] },
        id: { type: 'string', pattern: '^bg_[0-9a-f]+$' },
        since: { type: 'integer', minimum: 0 },
        data: { type: 'string', maxLength: 65_536 },
        eof: { type: 'boolean' },
        signal: { enum: ['SIGTERM', 'SIGINT', 'SIGHUP', 'SIGKILL', 'SIGUSR1', 'SIGUSR2'] },
      },
    },
    contexts: ['user', 'wake', 'cron', 'heartbeat', 'subagent', 'persona'],
    available: ({ persona }) => persona.tools.processes.max > 0,
    // Reading and listing are polled at times: the repeated-call guard would stop a wait for a build's output.
    allowRepeat: true,
    timeoutMs: 15_000,
    async run(args, ctx) {
      const caller = { persona: ctx.persona.name, conversationId: ctx.conversationId };
      if (args.action === 'list' || (args.action === 'status' && !args.id)) return processes.status(caller);
      if (!args.id) return `error: action "${args.action}" needs the id of a background command (process list shows them)`;
      switch (args.action) {
        case 'status':
          return processes.status(caller, args.id);
        case 'read':
          return processes.read(caller, args.id, args.since);
        case 'write':
          if (args.data === undefined && !args.eof) return 'error: write needs data (or eof=true to close the input)';
          return processes.write(caller, args.id, args.data ?? '', args.eof ?? false);
        case 'signal':
          return processes.signal(caller, args.id, args.signal ?? 'SIGTERM');
        case 'remove':
          return processes.remove(caller, args.id);
      }
    },
  };
}
