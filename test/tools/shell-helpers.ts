// Helpers for the shell_exec tests: processes found by a marker in their command line, since a pid printed
// inside the sandbox is a pid of its own namespace, not one the test can signal.
import fs from 'node:fs';
import pino from 'pino';
import type { SandboxStatus } from '../../src/tools/sandbox.ts';

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

export const NO_SANDBOX: () => SandboxStatus = () => ({ available: false, detail: 'bubblewrap is not installed (apt install bubblewrap)' });

/** Live processes (not zombies) whose command line holds `marker`. */
export function processesWith(marker: string): number[] {
  const found: number[] = [];
  for (const name of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      if (!fs.readFileSync(`/proc/${name}/cmdline`, 'utf8').includes(marker)) continue;
      if (/^\d+ \(.*\) [ZX]/.test(fs.readFileSync(`/proc/${name}/stat`, 'utf8'))) continue;
      found.push(Number(name));
    } catch {
      // gone meanwhile
    }
  }
  return found.filter((pid) => pid !== process.pid);
}

/** Waits until a process with `marker` runs; its pids. */
export async function waitForProcess(marker: string): Promise<number[]> {
  for (let i = 0; i < 300; i++) {
    const pids = processesWith(marker);
    if (pids.length) return pids;
    await sleep(10);
  }
  throw new Error(`no process with ${marker} started`);
}

/** Kills what a failing test left behind. */
export function killAll(markers: string[]): void {
  for (const pid of markers.flatMap(processesWith)) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
}

/** A logger whose warnings the test can read. */
export function recordingLogger(): { log: pino.Logger; warnings: string[] } {
  const warnings: string[] = [];
  const log = pino({ level: 'warn' }, { write: (line: string) => void warnings.push(JSON.parse(line).msg) });
  return { log, warnings };
}
