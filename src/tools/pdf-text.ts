/**
 * The text of each page of a PDF (pdf.js through unpdf, loaded on the first PDF only: it is large). Throws an Error
 * the model can read when the file cannot be read as a PDF; a PDF of scanned images gives pages with no text.
 */
export async function pdfPages(given: string, bytes: Buffer): Promise<string[]> {
  const { extractText, getDocumentProxy } = await import('unpdf');
  try {
    const document = await getDocumentProxy(new Uint8Array(bytes), { verbosity: 0 });
    return (await extractText(document, { mergePages: false })).text;
  } catch (err) {
    throw new Error(`"${given}" looks like a PDF but its text could not be read (${(err as Error).message.split('\n')[0]}); it may be damaged or encrypted`, { cause: err });
  }
}
