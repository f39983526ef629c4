import { ModelError, toModelError, type ModelRequest, type ModelResponse } from './types.ts';

/** How long a model call may send nothing (before its first byte included) before it is given up and retried. */
export const DEFAULT_STALL_MS = 180_000;

/**
 * One model call's guard against a provider that stops sending: a signal that aborts with the caller's, or when
 * `touch` (called on every piece of the answer) has not run for `ms`. A stall becomes a retryable error.
 */
export function stallGuard(parent: AbortSignal | undefined, ms: number) {
  const controller = new AbortController();
  let stalled = false;
  let timer: NodeJS.Timeout | undefined;
  const touch = () => {
    clearTimeout(timer);
    timer = setTimeout(() => {
      stalled = true;
      controller.abort();
    }, ms);
  };
  const onAbort = () => controller.abort(parent?.reason);
  if (parent?.aborted) controller.abort(parent.reason);
  else parent?.addEventListener('abort', onAbort, { once: true });
  touch();
  return {
    signal: controller.signal,
    touch,
    /** The error to throw instead of the SDK's abort, when it was a stall. */
    failure(err: unknown): ModelError | undefined {
      if (!stalled || parent?.aborted) return undefined;
      return new ModelError({ message: `the model sent nothing for ${Math.round(ms / 1000)} s`, kind: 'network' }, { cause: err });
    },
    done() {
      clearTimeout(timer);
      parent?.removeEventListener('abort', onAbort);
    },
  };
}

/**
 * One provider call under a stall guard: `call` streams with the guard's signal and calls `touch` on every piece.
 * Its failures come out as ModelErrors, a stall as a retryable one (also when the cut-off stream ended as if whole).
 */
export async function guardedCall(
  request: ModelRequest,
  stallMs: number | undefined,
  call: (request: ModelRequest, touch: () => void) => Promise<ModelResponse>,
): Promise<ModelResponse> {
  const guard = stallGuard(request.signal, stallMs ?? DEFAULT_STALL_MS);
  try {
    const response = await call({ ...request, signal: guard.signal }, guard.touch);
    const stalled = guard.failure(undefined);
    if (stalled) throw stalled;
    return response;
  } catch (err) {
    throw guard.failure(err) ?? toModelError(err, request.signal);
  } finally {
    guard.done();
  }
}
