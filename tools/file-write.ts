import { formatBytes, splitLines } from '#src/tools/text-lines.ts';
import type { Tool } from '#src/tools/types.ts';
import { resolveWorkspaceTarget, type WorkspaceRules } from '#src/tools/workspace.ts';
import { WorkspacePathError } from '#src/tools/workspace-io.ts';
import { WorkspaceFileExistsError, writeWorkspaceFile } from '#src/tools/workspace-write.ts';

interface Args {
  path: string;
  content: string;
  overwrite?: boolean;
}

export const MAX_WRITE_BYTES = 1024 * 1024;

/**
 * Writes a UTF-8 file in the persona's workspace, creating its folders, atomically (see workspace-write.ts). An
 * existing file is replaced only with `overwrite: true`.
 */
export function createFileWriteTool(deps: WorkspaceRules = {}): Tool<Args> {
  return {
    name: 'file_write',
    description:
      'Write a UTF-8 text file in your workspace, creating missing folders. An existing file is replaced only with overwrite: true ' +
      '(to change part of a file, use file_edit). Content up to 1 MB.',
    parameters: {
      type: 'object',
      additionalProperties: false,
      required: ['path', 'content'],
      properties: {
        path: { type: 'string', minLength: 1, description: 'relative to your workspace' },
        content: { type: 'string' },
        overwrite: { type: 'boolean' },
      },
    },
    timeoutMs: 30_000,
    approval: { summary: (args) => `write ${args.path} (${Buffer.byteLength(args.content)} bytes${args.overwrite ? ', replacing it if it exists' : ''})` },
    async run(args, ctx) {
      const content = Buffer.from(args.content, 'utf8');
      if (content.length > MAX_WRITE_BYTES) {
        return `error: content is ${formatBytes(content.length)}, over file_write's 1 MB limit (${MAX_WRITE_BYTES} bytes); write a smaller file, or make large files with shell_exec`;
      }
      return writeText(ctx.persona, args.path, content, { overwrite: args.overwrite ?? false, rules: deps });
    },
  };
}

/** Writes a checked workspace file for file_write and file_edit: `wrote <path> (...)`, or an `error: ...` to read. */
export async function writeText(
  persona: Parameters<typeof resolveWorkspaceTarget>[0],
  given: string,
  content: Buffer,
  options: { overwrite: boolean; rules: WorkspaceRules },
): Promise<string> {
  try {
    const target = await resolveWorkspaceTarget(persona, given, options.rules);
    if (target.stat?.isDirectory()) return `error: "${given}" is a folder; give a file name in it`;
    if (target.stat && !options.overwrite) {
      return `error: "${given}" already exists; read it and change it with file_edit, or call file_write again with overwrite: true to replace it`;
    }
    await writeWorkspaceFile(persona.workspace, target.relative, content, { overwrite: options.overwrite, rules: options.rules });
  } catch (err) {
    if (err instanceof WorkspaceFileExistsError) return `error: ${err.message} (it appeared while writing); read it first, or use overwrite: true`;
    if (err instanceof WorkspacePathError) return `error: "${given}" changed while it was being written (${err.message}); nothing was written`;
    return `error: ${(err as Error).message}`;
  }
  return `wrote ${given} (${content.length} bytes, ${splitLines(content.toString('utf8')).length} lines)`;
}
