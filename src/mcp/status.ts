/** One declared MCP server, as `parlor doctor` shows it. */
export interface McpServerStatus {
  name: string;
  /** The persona whose `mcp.jsonc` declares it; absent for a server of the global file. */
  persona?: string;
  file: string;
  transport?: 'stdio' | 'http';
  /** `idle`: declared, but no persona has needed it yet (servers connect on first use). */
  state: 'connected' | 'connecting' | 'down' | 'disabled' | 'idle';
  /** Why it is down. */
  error?: string;
  /** When it is down and will be tried again. */
  retryInMs?: number;
  /** The process of a connected stdio server. */
  pid?: number;
  /** Its tools as the model sees them (after `allow` and `deny`). */
  tools: string[];
  /** A persona's server that takes the place of the global one of the same name for that persona. */
  replacesGlobal?: boolean;
}

export interface McpStatus {
  globalFile: string;
  /** `mcp.jsonc` files that cannot be used, with the error (naming the file and JSON path). */
  files: { file: string; error: string }[];
  servers: McpServerStatus[];
}

/** Whether doctor should fail: a file cannot be read, or a server is down. */
export function mcpStatusHasProblems(status: McpStatus): boolean {
  return status.files.length > 0 || status.servers.some((s) => s.state === 'down');
}

/** One line per file problem and per server, for `parlor doctor`. */
export function formatMcpStatus(status: McpStatus): string[] {
  const lines = status.files.map((f) => `error: ${f.error}`);
  if (status.servers.length === 0) {
    lines.push(`no MCP servers (declare them in ${status.globalFile} or in a persona's mcp.jsonc)`);
    return lines;
  }
  for (const server of status.servers) {
    const where = [server.persona ? `persona ${server.persona}` : 'global', server.transport, server.replacesGlobal ? 'replaces the global one' : undefined]
      .filter(Boolean)
      .join(', ');
    lines.push(`${server.name} (${where}): ${describeState(server)}`);
  }
  return lines;
}

function describeState(server: McpServerStatus): string {
  switch (server.state) {
    case 'connected': {
      const count = `${server.tools.length} tool${server.tools.length === 1 ? '' : 's'}`;
      return `connected${server.pid ? ` (pid ${server.pid})` : ''}, ${count}${server.tools.length ? `: ${server.tools.join(', ')}` : ''}`;
    }
    case 'connecting':
      return 'connecting';
    case 'down': {
      const retry = server.retryInMs !== undefined ? `; reconnecting in ${Math.max(1, Math.ceil(server.retryInMs / 1000))} s` : '';
      return `down: ${server.error ?? 'not connected'}${retry}`;
    }
    case 'disabled':
      return 'disabled';
    case 'idle':
      return 'not started yet (it connects when a persona first needs it)';
  }
}
