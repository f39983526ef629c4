/**
 * Items handed to `write` in batches: the first goes at once, and those added while a write is in flight go
 * together in the next. `add` resolves when its item's write has ended.
 */
export function batched<T>(write: (items: T[]) => Promise<void>) {
  let queue: { item: T; done: () => void }[] = [];
  let writing: Promise<void> | undefined;
  const next = (): Promise<void> | undefined => {
    if (queue.length === 0) return (writing = undefined);
    const batch = queue;
    queue = [];
    return (writing = write(batch.map((q) => q.item))
      .catch(() => {})
      .then(() => {
        for (const q of batch) q.done();
        return next();
      }));
  };
  return {
    add(item: T): Promise<void> {
      return new Promise((done) => {
        queue.push({ item, done });
        if (!writing) void next();
      });
    },
    async idle() {
      while (writing) await writing;
    },
  };
}
