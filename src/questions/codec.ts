import { randomBytes } from 'node:crypto';

/** Telegram's limit for callback data, the tightest of the platforms. */
export const MAX_PAYLOAD_BYTES = 64;

const PAYLOAD = /^q:([A-Za-z0-9_-]{1,40}):([A-Za-z0-9_-]{1,16})$/;

/** A random, unguessable question id (96 bits, URL-safe). */
export function newQuestionId(): string {
  return randomBytes(12).toString('base64url');
}

/** The short id people see (`Q#ab12cd`). */
export function shortQuestionId(id: string): string {
  return id.slice(0, 6);
}

/** A button's payload: `q:<question id>:<choice id>`. */
export function encodeChoice(questionId: string, choiceId: string): string {
  const payload = `q:${questionId}:${choiceId}`;
  if (!PAYLOAD.test(payload) || Buffer.byteLength(payload) > MAX_PAYLOAD_BYTES) {
    throw new Error(`button payload "${payload}" is malformed or over ${MAX_PAYLOAD_BYTES} bytes`);
  }
  return payload;
}

export function decodeChoice(payload: string): { questionId: string; choiceId: string } | undefined {
  const match = PAYLOAD.exec(payload);
  return match ? { questionId: match[1], choiceId: match[2] } : undefined;
}
