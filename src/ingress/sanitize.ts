/**
 * Text Postgres cannot store: NUL (refused by `text` and `jsonb` alike) and lone UTF-16 surrogates (refused by
 * `jsonb`, and turned into garbage by UTF-8 encoding elsewhere). Platforms pass both through from their users.
 */
const NUL = /\u0000/g;
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

/** The string without NUL, with each lone surrogate replaced by U+FFFD. */
export function sanitizeText(text: string): string {
  return text.replace(NUL, '').replace(LONE_SURROGATE, '\uFFFD');
}

/**
 * A copy of a platform event (plain data: objects, arrays, strings, numbers) in which every string, keys
 * included, can be stored. Values that need no change are returned as they are.
 */
export function sanitizeEvent<T>(value: T): T {
  return clean(value) as T;
}

function clean(value: unknown): unknown {
  if (typeof value === 'string') return sanitizeText(value);
  if (Array.isArray(value)) return value.map(clean);
  if (value && typeof value === 'object' && Object.getPrototypeOf(value) === Object.prototype) {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [sanitizeText(k), clean(v)]));
  }
  return value;
}
