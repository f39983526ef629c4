// What a chat may show of the model's text: never reasoning blocks or harness markers.

const THINK_BLOCK = /<(think|thinking|reasoning|analysis)\b[^>]*>[\s\S]*?<\/\1>/gi;
const UNCLOSED_THINK = /<(think|thinking|reasoning|analysis)\b[^>]*>[\s\S]*$/i;
const STRAY_CLOSE = /^[\s\S]*?<\/(think|thinking|reasoning|analysis)>/i;
/** Markers some models emit for "nothing to report" on background work, alone or at either end of a reply. */
const MARKER = '(?:NO_REPLY|HEARTBEAT_OK|NOTHING_TO_DO|\\[silent\\])';
const LEADING_MARKER = new RegExp(`^${MARKER}[\\s.:,-]*`, 'i');
const TRAILING_MARKER = new RegExp(`\\s*${MARKER}[.!]?$`, 'i');

export function stripInternalText(text: string): string {
  let out = text.replace(THINK_BLOCK, '');
  // A reply that opens with a closing tag had its opening tag in a prefill or earlier chunk.
  out = out.replace(STRAY_CLOSE, (m) => (/<(think|thinking|reasoning|analysis)\b/i.test(m) ? m : ''));
  out = out.replace(UNCLOSED_THINK, '');
  out = out.trim().replace(LEADING_MARKER, '').replace(TRAILING_MARKER, '');
  return out.trim();
}
