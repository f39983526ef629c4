// Bundles Parlor's TypeScript into dist/parlor.mjs (run by `npm install` through `prepare`). Packages stay
// external, so Node loads them directly; the `parlor` command falls back to running the sources through tsx
// whenever they are newer than the bundle (or the bundle is missing), so an edit never runs stale code.
import { build } from 'esbuild';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
try {
  await build({
    absWorkingDir: root,
    entryPoints: ['src/main.ts'],
    outfile: 'dist/parlor.mjs',
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    packages: 'external',
    sourcemap: 'linked',
    logLevel: 'warning',
  });
} catch (err) {
  // A failed bundle only costs start-up time: the command then runs the sources.
  console.warn(`parlor: could not build dist/parlor.mjs (${err instanceof Error ? err.message : err}); the sources will be run directly`);
}
