// Run by file-write-crash.test.ts as a process of its own, to be killed with SIGKILL part way through a write:
//   file-write-crash-child.ts <workspace> <relative path> <bytes> hold|run
// `hold` stops once the content is written and synced, before the rename, says "ready" and waits to be killed.
import { writeWorkspaceFile } from '../../src/tools/workspace-write.ts';

const [workspace, relative, bytes, mode] = process.argv.slice(2);
const content = Buffer.alloc(Number(bytes), 'n');
const hold = async () => {
  process.stdout.write('ready\n');
  setInterval(() => {}, 1000);
  await new Promise<never>(() => {});
};
process.stdout.write('started\n');
await writeWorkspaceFile(workspace, relative, content, { overwrite: true, beforeRename: mode === 'hold' ? hold : undefined });
process.stdout.write('done\n');
