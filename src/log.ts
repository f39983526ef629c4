import fs from 'node:fs';
import path from 'node:path';
import pino, { type Logger } from 'pino';
import { ConfigError } from '#src/config/errors.ts';

/**
 * Structured logs: JSON lines, or pretty ones when the destination is a terminal; with `file` (PARLOR_LOG_FILE),
 * JSON lines appended to that file instead.
 */
export function createLogger(options: { level: string; stream?: 'stdout' | 'stderr'; file?: string }): Logger {
  if (options.file) {
    try {
      fs.mkdirSync(path.dirname(options.file), { recursive: true });
      fs.closeSync(fs.openSync(options.file, 'a'));
    } catch (err) {
      throw new ConfigError(`PARLOR_LOG_FILE=${options.file} cannot be written (${(err as NodeJS.ErrnoException).code ?? (err as Error).message}); pick a file this user may write`);
    }
    return pino({ level: options.level, base: undefined }, pino.destination({ dest: options.file, append: true, sync: false }));
  }
  const fd = options.stream === 'stderr' ? 2 : 1;
  const isTty = fd === 1 ? process.stdout.isTTY : process.stderr.isTTY;
  if (isTty) {
    return pino({
      level: options.level,
      transport: { target: 'pino-pretty', options: { destination: fd, colorize: true, translateTime: 'HH:MM:ss', ignore: 'pid,hostname' } },
    });
  }
  return pino({ level: options.level, base: undefined }, pino.destination({ fd, sync: false }));
}
