import pino, { type Logger } from 'pino';

/** Structured logs: JSON lines, or pretty ones when the destination is a terminal. */
export function createLogger(options: { level: string; stream?: 'stdout' | 'stderr' }): Logger {
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
