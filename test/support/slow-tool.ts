// A tool that takes as long as it is told (or until its turn is stopped): a turn that is still running when the test
// acts. `hooks.started` is called as it begins (a test sets it to a promise's resolve to wait for that).
import type { Tool } from '../../src/tools/types.ts';

export function slowTool(hooks: { started: () => void }): Tool<{ ms: number }> {
  return {
    name: 'slow_task',
    description: 'waits',
    parameters: { type: 'object', properties: { ms: { type: 'number' } }, required: ['ms'] },
    timeoutMs: 60_000,
    async run(args, ctx) {
      hooks.started();
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, args.ms);
        ctx.signal.addEventListener('abort', () => (clearTimeout(t), resolve()), { once: true });
      });
      return `waited ${args.ms}`;
    },
  };
}
