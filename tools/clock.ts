import type { Tool } from '#src/tools/types.ts';

interface Args {
  timezone?: string;
}

export function createClockTool(deps: { timezone: string; now?: () => Date }): Tool<Args> {
  return {
    name: 'clock',
    description: `The current date and time. timezone is an IANA name (default ${deps.timezone}).`,
    parameters: {
      type: 'object',
      additionalProperties: false,
      properties: { timezone: { type: 'string', minLength: 1 } },
    },
    timeoutMs: 1000,
    allowRepeat: true,
    async run(args) {
      const zone = args.timezone ?? deps.timezone;
      const now = deps.now?.() ?? new Date();
      let local: string;
      try {
        local = new Intl.DateTimeFormat('en-GB', { timeZone: zone, dateStyle: 'full', timeStyle: 'long' }).format(now);
      } catch {
        return `error: "${zone}" is not a time zone; use an IANA name such as Europe/Berlin or America/New_York`;
      }
      return `${local}\nISO (UTC): ${now.toISOString()}\ntime zone: ${zone}`;
    },
  };
}
