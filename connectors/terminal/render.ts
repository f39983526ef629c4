import { Marked } from 'marked';
import { markedTerminal } from 'marked-terminal';

/**
 * The model's Markdown for a person at a terminal: bold, code, lists and quotes drawn with the terminal's own styles
 * (marked-terminal), so `**` and backticks do not show. Piped output stays as the model wrote it.
 */
export function createTerminalRenderer(): (markdown: string) => string {
  const marked = new Marked();
  // The type declarations lag behind marked's own; the extension is what marked expects.
  marked.use(markedTerminal({ reflowText: false, tab: 2, emoji: false }) as never);
  return (markdown) => {
    try {
      return (marked.parse(markdown, { async: false }) as string).replace(/\n+$/, '');
    } catch {
      return markdown;
    }
  };
}
