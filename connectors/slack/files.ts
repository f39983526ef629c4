// Files people share, fetched for the core after the commit, and what files.uploadV2 answers.
import path from 'node:path';
import type { webApi } from '@slack/bolt';
import type { Attachment } from '#src/connector.ts';
import { saveDownload } from '../shared/download.ts';
import { toPlatformError } from './web-api.ts';


/** Saves a shared file into `directory` (files.info for its private URL, fetched with the bot token). */
export async function downloadFile(
  deps: { client: webApi.WebClient; botToken: string; apiUrl: string; signal: AbortSignal },
  attachment: Attachment,
  directory: string,
): Promise<string> {
  let info: any;
  try {
    info = await deps.client.files.info({ file: attachment.fileId! });
  } catch (err) {
    throw toPlatformError(err, 'files.info', false);
  }
  const url: string | undefined = info.file?.url_private_download ?? info.file?.url_private;
  if (!url) throw new Error('Slack gave no download URL for the file');
  const name = uploadName(attachment.name ?? info.file?.name ?? attachment.type, attachment.fileId!);
  // The bot token is sent only to Slack's own file host or the configured API's host.
  return saveDownload(url, { directory, name }, deps.signal, trustedHost(url, deps.apiUrl) ? { authorization: `Bearer ${deps.botToken}` } : {});
}

/** The ts of the message files.uploadV2 shared the file in (what an edit or a reaction names). */
export function shareTs(result: any, channel: string): string | undefined {
  const shares = result?.files?.[0]?.files?.[0]?.shares;
  const ts = shares?.public?.[channel]?.[0]?.ts ?? shares?.private?.[channel]?.[0]?.ts;
  return typeof ts === 'string' ? ts : undefined;
}

function trustedHost(url: string, apiUrl: string): boolean {
  try {
    const host = new URL(url).hostname;
    return host === 'files.slack.com' || host.endsWith('.slack.com') || host === new URL(apiUrl).hostname;
  } catch {
    return false;
  }
}

function uploadName(name: string, fileId: string): string {
  const original = path.basename(name).replace(/[^\w.-]+/g, '_') || 'file';
  const ext = path.extname(original);
  return `${path.basename(original, ext).slice(0, 60)}-${fileId.slice(-8).replace(/[^\w-]/g, '')}${ext}`;
}
