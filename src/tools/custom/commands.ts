import type { Persona } from '#src/config/persona.ts';
import type { ToolContext } from '#src/tools/types.ts';

/** What a custom tool runs: a program and its arguments, in the persona's workspace. */
export interface CustomCommand {
  /** `/bin/sh -c <the expanded template>`, or the tool's executable. */
  argv: string[];
  /** Variables on top of the minimal environment commands get; a value written `$NAME` is the persona's secret NAME. */
  env: Record<string, string>;
  /** Variables taken as they are (a template's arguments: `$NAME` in them is text, never a secret). */
  values?: Record<string, string>;
  timeoutMs: number;
  /** Written to stdin, which is closed then (a `run` tool's arguments as JSON); without it stdin is empty. */
  input?: string;
  /** The tool's own folder: readable, not writable, inside the sandbox. */
  folder: string;
  /** The tool's name, for logs. */
  tool: string;
}

/** How a custom tool's command ended: its stdout and stderr apart, each cut to shell_exec's output cap. */
export interface CustomCommandResult {
  /** `0`, `1`, `timeout`, `cancelled`, `signal SIGTERM`... */
  status: string;
  stdout: string;
  /** Bytes of stdout past the cap, left out. */
  stdoutDropped: number;
  stderr: string;
  /** How it was killed, when it was (`[killed after 30 s: timed out]`). */
  notes: string[];
}

/**
 * How custom tools run their commands: the way shell_exec runs its own (the sandbox or a user of their own, the
 * scrubbed environment, the caps, the deny patterns, the whole tree killed). tools/shell-exec.ts implements it
 * (`createCustomToolCommands`) and the composition root hands it over, since the core does not import tools/.
 */
export interface CustomToolCommands {
  /** Whether commands can run for the persona at all (shell_exec's policy: sandbox, separate user, or opt-in). */
  available(persona: Persona): boolean;
  /** Why a shell script is refused before anyone is asked to approve it, or undefined. */
  deniedReason(script: string): string | undefined;
  /** Runs it to its end; why it did not run, when it did not. */
  run(command: CustomCommand, ctx: ToolContext): Promise<CustomCommandResult | { error: string }>;
}
