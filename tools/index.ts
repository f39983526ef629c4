import type { MemoryRegistry } from '#src/memory/store.ts';
import type { ProcessRegistry } from '#src/tools/processes.ts';
import type { Tool, ToolGroup } from '#src/tools/types.ts';
import type { SearchProvider } from '#src/tools/web/search.ts';
import { createAskPersonaTool } from './ask-persona.ts';
import { createAskUserTool } from './ask-user.ts';
import { createClockTool } from './clock.ts';
import { createEndTaskTool } from './end-task.ts';
import { createFileEditTool } from './file-edit.ts';
import { createFileReadTool } from './file-read.ts';
import { createFileWriteTool } from './file-write.ts';
import { createGlobTool } from './glob.ts';
import { createGrepTool } from './grep.ts';
import { createKnowledgeIngestTool } from './knowledge-ingest.ts';
import { createListDirTool } from './list-dir.ts';
import { createLoadSkillTool } from './load-skill.ts';
import { createMemoryTool } from './memory.ts';
import { createProcessTool } from './process.ts';
import { createReactTool } from './react.ts';
import { createRecallTool } from './recall.ts';
import { createRemindTool } from './remind.ts';
import { createReplyToOriginTool } from './reply-to-origin.ts';
import { createScheduleWakeupTool } from './schedule-wakeup.ts';
import { createSendMessageTool } from './send-message.ts';
import { createSendToPersonaTool } from './send-to-persona.ts';
import { createShellExecTool, type ShellExecOptions } from './shell-exec.ts';
import { createSpawnSubagentTool } from './spawn-subagent.ts';
import { createTaskCancelTool } from './task-cancel.ts';
import { createTaskStatusTool } from './task-status.ts';
import { createThinkHarderTool } from './think-harder.ts';
import { createToolActivateTool } from './tool-activate.ts';
import { createToolSearchTool } from './tool-search.ts';
import { createUserModelWriteTool } from './user-model-write.ts';
import { createWebFetchTool } from './web-fetch.ts';
import { createWebSearchTool } from './web-search.ts';

/** The group of each built-in (`group:<name>` in tools.jsonc); a tool not named here is in none. */
export const BUILTIN_GROUPS: Record<string, ToolGroup> = {
  file_read: 'fs',
  file_write: 'fs',
  file_edit: 'fs',
  list_dir: 'fs',
  glob: 'fs',
  grep: 'fs',
  web_fetch: 'web',
  web_search: 'web',
  shell_exec: 'runtime',
  process: 'runtime',
  memory: 'memory',
  recall: 'memory',
  user_model_write: 'memory',
  knowledge_ingest: 'memory',
  load_skill: 'memory',
  send_message: 'messaging',
  react: 'messaging',
  ask_user: 'messaging',
  reply_to_origin: 'messaging',
  send_to_persona: 'messaging',
  ask_persona: 'messaging',
  spawn_subagent: 'agents',
  task_status: 'agents',
  task_cancel: 'agents',
  schedule_wakeup: 'schedule',
  remind: 'schedule',
};

/**
 * The built-in tool set. Each tool is a factory that receives what it needs. `shellSandbox.hide` names what no
 * command may see even under a folder the sandbox shows: Parlor's home, the personas folder, the `.env` file;
 * `personaDirs` adds every persona's folder, wherever its symlink leads. `outgoingDir` is where `send_message`
 * keeps copies of the files it sends: a folder no command can see (under Parlor's home). `processes` holds the
 * commands shell_exec leaves running in the background; without it every command runs to its end. `webSearch` is
 * the search backend the settings name (web_search is not offered without one). `memory` is where memory, recall,
 * user_model_write and knowledge_ingest keep what the persona remembers and reads (not offered without it).
 */
export function createBuiltinTools(deps: {
  timezone: string;
  shellSandbox?: ShellExecOptions['sandbox'];
  personaDirs?: readonly string[];
  outgoingDir?: string;
  processes?: ProcessRegistry;
  webSearch?: SearchProvider;
  memory?: MemoryRegistry;
}): Tool[] {
  const hide = [...(deps.shellSandbox?.hide ?? []), ...(deps.personaDirs ?? [])];
  // Every tool that touches the persona's files refuses the other personas' folders.
  const files = { personaDirs: deps.personaDirs };
  const tools: Tool[] = [
    createEndTaskTool(),
    createClockTool({ timezone: deps.timezone }),
    createSendMessageTool({ outgoingDir: deps.outgoingDir, ...files }),
    createFileReadTool(files),
    createFileWriteTool(files),
    createFileEditTool(files),
    createListDirTool(files),
    createGlobTool(files),
    createGrepTool(files),
    createThinkHarderTool(),
    createReactTool(),
    createAskUserTool(),
    createShellExecTool({ sandbox: { ...deps.shellSandbox, hide }, processes: deps.processes }),
    ...(deps.processes ? [createProcessTool(deps.processes)] : []),
    createScheduleWakeupTool(),
    createRemindTool({ timezone: deps.timezone }),
    createReplyToOriginTool(),
    createSpawnSubagentTool(),
    createTaskStatusTool(deps.processes),
    createTaskCancelTool(deps.processes),
    createSendToPersonaTool(),
    createAskPersonaTool(),
    createWebFetchTool(),
    createWebSearchTool({ provider: deps.webSearch }),
    ...(deps.memory
      ? [
          createMemoryTool({ memory: deps.memory }),
          createRecallTool({ memory: deps.memory, timezone: deps.timezone }),
          createUserModelWriteTool({ memory: deps.memory }),
          createKnowledgeIngestTool({ memory: deps.memory, ...files }),
        ]
      : []),
    createLoadSkillTool(),
    createToolSearchTool(),
    createToolActivateTool(),
  ];
  for (const tool of tools) {
    tool.group ??= BUILTIN_GROUPS[tool.name] ?? 'other';
    tool.tier = 'core';
  }
  return tools;
}
