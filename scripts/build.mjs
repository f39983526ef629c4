// Bundles Parlor's TypeScript into dist/parlor.mjs (run by `npm install` through `prepare`). Packages stay
// external, so Node loads them directly; the `parlor` command falls back to running the sources through tsx
// whenever they are newer than the bundle (or the bundle is missing), so an edit never runs stale code.
import { build } from 'esbuild';
import { rmSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
try {
  // Chunks are named by their content: last build's would pile up.
  rmSync(new URL('../dist', import.meta.url), { recursive: true, force: true });
  await build({
    absWorkingDir: root,
    entryPoints: { parlor: 'src/main.ts' },
    outdir: 'dist',
    outExtension: { '.js': '.mjs' },
    // Each platform's connector (and its SDK) in a chunk of its own, loaded only when that platform is configured:
    // `parlor --version` does not wait for discord.js or Bolt.
    splitting: true,
    chunkNames: 'chunks/[name]-[hash]',
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
