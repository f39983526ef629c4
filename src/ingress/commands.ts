// Control commands act on the conversation directly; they never wait behind a turn.

export type ControlCommand =
  | { name: 'stop' }
  | { name: 'new' }
  | { name: 'status' }
  | { name: 'think'; on?: boolean }
  | { name: 'help' };

/**
 * Parses `/stop`, `/new`, `/status`, `/help` and `/think [on|off]` (connectors strip their platform's own forms, such as
 * a bot name after the command). Anything else,
 * including a command followed by other words ("/new plan for the trip"), is an ordinary message.
 */
export function parseControlCommand(text: string): ControlCommand | undefined {
  const match = /^\/([a-z]+)(?:\s+(.*))?$/i.exec(text.trim());
  if (!match) return undefined;
  const name = match[1].toLowerCase();
  const arg = match[2]?.trim().toLowerCase();
  if (name === 'think' && (arg === undefined || arg === 'on' || arg === 'off')) {
    return { name: 'think', on: arg === 'on' ? true : arg === 'off' ? false : undefined };
  }
  if (arg !== undefined) return undefined;
  return name === 'stop' || name === 'new' || name === 'status' || name === 'help' ? { name } : undefined;
}

/** Commands that change a conversation for everyone in it: in a group, only the persona's own people may use them. */
export const SHARED_CONVERSATION_COMMANDS: readonly ControlCommand['name'][] = ['new', 'think'];

export const HELP_TEXT = [
  'Commands:',
  '/stop - stop what I am doing now',
  '/new - start a fresh conversation (I forget the earlier messages)',
  '/status - what I am doing, my model and this conversation',
  '/think on|off - think harder on every answer, or not',
].join('\n');
