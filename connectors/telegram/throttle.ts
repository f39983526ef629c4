/**
 * Telegram's flood limits are about one message a second per chat and twenty a minute per group. A token bucket
 * per chat lets a chat burst (the first reply never waits) and slows only sustained sending. Chat actions
 * ("typing…") do not use it. A 429 is still honoured separately, per call.
 */
export interface ChatThrottle {
  /** Resolves when a message may be sent to `chat`. */
  take(chat: string): Promise<void>;
}

interface Bucket {
  tokens: number;
  updated: number;
}

export function createChatThrottle(options: { burst?: number; perSecond?: number; groupPerMinute?: number } = {}): ChatThrottle {
  const burst = options.burst ?? 3;
  const dmRate = options.perSecond ?? 1;
  const groupRate = (options.groupPerMinute ?? 20) / 60;
  const buckets = new Map<string, Bucket>();
  let lastSweep = Date.now();

  return {
    async take(chat) {
      const now = Date.now();
      // Group and channel ids are negative.
      const rate = chat.startsWith('-') ? groupRate : dmRate;
      if (now - lastSweep > 60_000) {
        for (const [id, b] of buckets) if (now - b.updated > 600_000) buckets.delete(id);
        lastSweep = now;
      }
      const bucket = buckets.get(chat) ?? { tokens: burst, updated: now };
      bucket.tokens = Math.min(burst, bucket.tokens + ((now - bucket.updated) / 1000) * rate);
      bucket.updated = now;
      buckets.set(chat, bucket);
      bucket.tokens -= 1;
      if (bucket.tokens >= 0) return;
      // In debt: wait until the bucket has refilled to zero (later callers queue behind this one).
      await new Promise((resolve) => setTimeout(resolve, (-bucket.tokens / rate) * 1000));
    },
  };
}
