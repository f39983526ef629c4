import type { Tool } from '#src/tools/types.ts';
import { createAskUserTool } from './ask-user.ts';
import { createClockTool } from './clock.ts';
import { createEndTaskTool } from './end-task.ts';
import { createReactTool } from './react.ts';
import { createRemindTool } from './remind.ts';
import { createReplyToOriginTool } from './reply-to-origin.ts';
import { createScheduleWakeupTool } from './schedule-wakeup.ts';
import { createSendMessageTool } from './send-message.ts';
import { createShellExecTool } from './shell-exec.ts';
import { createThinkHarderTool } from './think-harder.ts';

/** The built-in tool set. Each tool is a factory that receives what it needs. */
export function createBuiltinTools(deps: { timezone: string }): Tool[] {
  return [
    createEndTaskTool(),
    createClockTool({ timezone: deps.timezone }),
    createSendMessageTool(),
    createThinkHarderTool(),
    createReactTool(),
    createAskUserTool(),
    createShellExecTool(),
    createScheduleWakeupTool(),
    createRemindTool({ timezone: deps.timezone }),
    createReplyToOriginTool(),
  ];
}
