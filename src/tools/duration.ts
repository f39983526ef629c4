import ms from 'ms';

/**
 * A duration a model or a person wrote: `"90s"`, `"30m"`, `"2h"`, `"1d"`, `"1.5 hours"`, or a bare number in
 * `bareUnit`. Returns milliseconds, or an error text that says what is accepted.
 */
export function parseDuration(input: string | number, bareUnit: 'seconds' | 'minutes'): { ms: number } | { error: string } {
  const text = String(input).trim();
  const factor = bareUnit === 'seconds' ? 1000 : 60_000;
  let value: number | undefined;
  if (/^\d+(\.\d+)?$/.test(text)) value = Number(text) * factor;
  // A bare "5ms" or "1y" is more likely a mistake than intended; keep to seconds through weeks.
  else if (/^\d+(\.\d+)?\s*(s|secs?|seconds?|m|mins?|minutes?|h|hrs?|hours?|d|days?|w|weeks?)$/i.test(text)) value = ms(text as ms.StringValue);
  if (value === undefined || !Number.isFinite(value) || value < 0) {
    return { error: `"${text}" is not a duration; use e.g. "90s", "30m", "2h", "1d" or a number of ${bareUnit}` };
  }
  return { ms: Math.round(value) };
}
