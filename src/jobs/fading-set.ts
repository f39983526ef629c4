/** A set whose entries are forgotten after two calls of `age` (two generations). */
export function fading() {
  let now = new Set<string>();
  let before = new Set<string>();
  return {
    add: (item: string) => void now.add(item),
    has: (item: string) => now.has(item) || before.has(item),
    delete: (item: string) => now.delete(item) || before.delete(item),
    age() {
      before = now;
      now = new Set();
    },
  };
}
