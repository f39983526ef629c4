import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/support/global-setup.ts'],
    // The scratch folders a file's tests made (test/support/temp-dirs.ts) are removed after it.
    setupFiles: ['test/support/each-file.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // Two cores: a few files at a time keeps Postgres and the child processes responsive.
    maxWorkers: 3,
    // Each worker imports the app once for all its files instead of once per file (about 2 s a file, most of the
    // suite's time on two cores). Tests leave no state behind that another file could see.
    isolate: false,
  },
});
