// The pace of a streamed reply: frames (a send, then edits) of the newest text, the first at once and each later
// one an interval after the previous one, never two at a time. Each connector's draft says how a frame is written.

export interface FramePacer {
  /** The newest text: it is shown at the next frame (texts that come faster are merged into it). */
  update(text: string): void;
  /** A frame's request begins now (after a wait of its own, such as a chat's send limit): the pace counts from it. */
  began(): void;
  /** No more frames: resolves once a frame in flight has ended. */
  stop(): Promise<void>;
}

export function createFramePacer(options: {
  intervalMs: number;
  /** No frame before this time (a 429's retry-after). */
  holdUntil?: () => number;
  /** Writes one frame; resolves true when the text is now on screen. */
  frame(text: string): Promise<boolean>;
  /** Awaited right before each frame is written (see DraftTarget.beforeWrite). */
  beforeFrame?: () => Promise<void>;
}): FramePacer {
  let latest = '';
  let shown = '';
  let lastFrame = 0;
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  let chain: Promise<void> = Promise.resolve();

  const untilNext = () => (lastFrame === 0 ? 0 : Math.max(0, lastFrame + options.intervalMs - Date.now(), (options.holdUntil?.() ?? 0) - Date.now()));

  async function frame(text: string) {
    lastFrame = Date.now();
    try {
      if (await options.frame(text)) shown = text;
    } finally {
      lastFrame = Date.now();
    }
  }

  function schedule() {
    if (stopped || timer) return;
    timer = setTimeout(() => {
      timer = undefined;
      if (stopped || latest === shown) return;
      chain = chain
        .then(async () => {
          // The frame before may have ended late (its request waited its turn): pace from it.
          const wait = untilNext();
          if (wait > 0) await new Promise((r) => setTimeout(r, wait));
          await options.beforeFrame?.();
          if (!stopped && latest !== shown) await frame(latest);
        })
        .then(() => {
          if (latest !== shown) schedule();
        });
    }, untilNext());
  }

  return {
    update(text) {
      latest = text;
      schedule();
    },
    began() {
      lastFrame = Date.now();
    },
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await chain;
    },
  };
}
