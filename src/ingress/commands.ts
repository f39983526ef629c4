// Control commands act on the conversation directly; they never wait behind a turn.

export type ControlCommand =
  | { name: 'stop' }
  | { name: 'new' }
  | { name: 'status' }
  | { name: 'think'; on?: boolean }
  | { name: 'help' };

/** Parses `/stop`, `/new`, `/status`, `/think on|off`, `/help` (also `/stop@botname`). Anything else is a message. */
export function parseControlCommand(text: string): ControlCommand | undefined {
  const match = /^\/([a-z]+)(?:@\w+)?(?:\s+(.*))?$/i.exec(text.trim());
  if (!match) return undefined;
  const name = match[1].toLowerCase();
  const arg = match[2]?.trim().toLowerCase();
  switch (name) {
    case 'stop':
    case 'new':
    case 'status':
    case 'help':
      return { name };
    case 'think':
      return { name: 'think', on: arg === 'on' ? true : arg === 'off' ? false : undefined };
    default:
      return undefined;
  }
}

export const HELP_TEXT = [
  'Commands:',
  '/stop - stop what I am doing now',
  '/new - start a fresh conversation (I forget the earlier messages)',
  '/status - what I am doing, my model and this conversation',
  '/think on|off - think harder on every answer, or not',
].join('\n');
