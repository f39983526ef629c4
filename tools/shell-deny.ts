// Commands shell_exec refuses outright, before any approval question. A seatbelt against the obviously
// catastrophic, not a sandbox: the approval step and the workspace are what keep everything else in check.

// The end of a shell word: whitespace, an operator, a closing bracket or the end of the command.
const WORD_END = String.raw`(?=[\s;&|)]|$)`;
// Within one simple command: stop at `;`, `&`, `|` and new lines.
const SAME_COMMAND = String.raw`[^;&|\n]*`;
// `/`, `/*`, `~`, `~/`, `~/*`, `$HOME`, `${HOME}/*`, optionally quoted.
const ROOT_OR_HOME = String.raw`['"]?(?:\/|~|\$HOME|\$\{HOME\})\/?\*?['"]?` + WORD_END;
const DISK = String.raw`\/dev\/(?:sd|hd|vd|xvd|nvme|mmcblk|disk)`;
// A word in command position: the start, or after an operator, `(`, a backtick or `$(`, optionally behind sudo.
const COMMAND_START = String.raw`(?:^|[;&|(\x60\n]|\$\()\s*(?:sudo\s+)?(?:\S*\/)?`;
const SHELL = String.raw`(?:ba|da|k|z|fi)?sh\b`;

const DENY_RULES: readonly { pattern: RegExp; reason: string }[] = [
  {
    pattern: new RegExp(String.raw`\brm(?=\s)(?=${SAME_COMMAND}\s-(?:[a-zA-Z]*[rR]|-recursive))(?=${SAME_COMMAND}\s${ROOT_OR_HOME})`),
    reason: 'recursively deleting the root or home directory',
  },
  { pattern: /--no-preserve-root\b/, reason: '--no-preserve-root turns off the guard against deleting /' },
  {
    pattern: new RegExp(String.raw`\bch(?:mod|own|grp)(?=\s)(?=${SAME_COMMAND}\s-(?:[a-zA-Z]*R|-recursive))(?=${SAME_COMMAND}\s['"]?\/\*?['"]?${WORD_END})`),
    reason: 'recursively changing permissions or ownership of the whole filesystem',
  },
  { pattern: /([\w.:-]+)\s*\(\s*\)\s*\{[^}]*\1\s*\|\s*\1\s*&/, reason: 'a fork bomb' },
  { pattern: new RegExp(String.raw`${COMMAND_START}mk(?:fs|e2fs)(?:\.\w+)?${WORD_END}`), reason: 'formatting a filesystem' },
  { pattern: new RegExp(String.raw`\bdd\b${SAME_COMMAND}\bof=${DISK}`), reason: 'writing raw data over a disk' },
  { pattern: new RegExp(String.raw`>\s*${DISK}`), reason: 'writing raw data over a disk' },
  {
    pattern: new RegExp(String.raw`\b(?:curl|wget)\b[^;&\n]*(?<!\|)\|(?!\|)\s*(?:sudo\s+(?:-\S+\s+)*)?(?:\S*\/)?${SHELL}`),
    reason: 'piping a download straight into a shell',
  },
  {
    pattern: new RegExp(String.raw`\b(?:${SHELL}|source|eval)\s*[^;&|\n]*(?:<\(|\$\(|\x60)\s*(?:curl|wget)\b`),
    reason: 'running a downloaded script straight from the network',
  },
  {
    pattern: new RegExp(String.raw`${COMMAND_START}(?:shutdown|reboot|halt|poweroff)${WORD_END}|\bsystemctl\s+(?:reboot|poweroff|halt|kexec)\b|${COMMAND_START}init\s+[06]\b`),
    reason: 'shutting down or rebooting the machine',
  },
];

/** Why a command is refused without asking anyone, or undefined when it may go on to approval and run. */
export function deniedReason(command: string): string | undefined {
  return DENY_RULES.find((rule) => rule.pattern.test(command))?.reason;
}
