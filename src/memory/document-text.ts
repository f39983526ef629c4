import { decodeText } from '#src/tools/text-lines.ts';
import { pdfPages } from '#src/tools/pdf-text.ts';
import { isPdf } from '#src/tools/workspace-read.ts';

/**
 * The text of a document for the knowledge base: a PDF's pages (pdf.js through unpdf) with a blank line between
 * them, else the file as UTF-8 text. Throws an Error the model can read for a binary file or a PDF without text.
 */
export async function documentText(given: string, bytes: Buffer): Promise<string> {
  if (!isPdf(bytes)) {
    const text = decodeText(bytes);
    if (text === undefined) throw new Error(`"${given}" is a binary file, not text, Markdown or a PDF`);
    return text;
  }
  const pages = await pdfPages(given, bytes);
  if (pages.every((page) => page.trim() === '')) throw new Error(`"${given}" is a PDF with no text in it (scanned images, perhaps)`);
  return pages.join('\n\n');
}
