// MCP servers as a ToolProvider: what the composition root and `parlor doctor` use.
export { createMcpToolProvider, type McpToolProvider, type McpToolProviderOptions } from './provider.ts';
export { formatMcpStatus, mcpStatusHasProblems, type McpServerStatus, type McpStatus } from './status.ts';
export { createMcpFileReader, type McpServerEntry } from './config.ts';
