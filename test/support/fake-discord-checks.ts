// Discord's checks on what a bot sends: message body limits as "Invalid Form Body" field errors, whom a message
// pings under `allowed_mentions`, and which flags a bot may set.
import { MessageFlag } from './fake-discord-state.ts';

/** Flags a bot may set on a message it sends (suppress embeds, silent, voice message, components v2). */
const SETTABLE_FLAGS = MessageFlag.SuppressEmbeds | MessageFlag.SuppressNotifications | MessageFlag.IsComponentsV2 | (1 << 13);

export interface MentionsFound {
  users: string[];
  roles: string[];
  everyone: boolean;
}

/** Who a message's text pings, after `allowed_mentions` (absent: everything written is pinged). */
export function mentionsIn(content: string, allowed?: { parse?: string[]; users?: string[]; roles?: string[]; replied_user?: boolean }): MentionsFound {
  const users = [...new Set([...content.matchAll(/<@!?(\d+)>/g)].map((m) => m[1]))];
  const roles = [...new Set([...content.matchAll(/<@&(\d+)>/g)].map((m) => m[1]))];
  const everyone = /@(everyone|here)/.test(content);
  if (!allowed) return { users, roles, everyone };
  const parse = allowed.parse ?? [];
  return {
    users: parse.includes('users') ? users : users.filter((id) => allowed.users?.includes(id)),
    roles: parse.includes('roles') ? roles : roles.filter((id) => allowed.roles?.includes(id)),
    everyone: everyone && parse.includes('everyone'),
  };
}

export function settableFlags(flags: unknown): number {
  return typeof flags === 'number' ? flags & SETTABLE_FLAGS : 0;
}

/** A Discord JSON error, optionally with `errors` nested by field path (as "Invalid Form Body" answers). */
export function apiError(code: number, message: string, fieldErrors?: { path: (string | number)[]; code: string; message: string }[]) {
  if (!fieldErrors?.length) return { message, code };
  const errors: Record<string, any> = {};
  for (const e of fieldErrors) {
    let node = errors;
    for (const key of e.path) node = node[key] ??= {};
    (node._errors ??= []).push({ code: e.code, message: e.message });
  }
  return { message, code, errors };
}

/** Discord's checks on a message body, as "Invalid Form Body" (50035) field errors; empty when valid. */
export function messageBodyErrors(body: Record<string, any>, { creating, files }: { creating: boolean; files: number }) {
  const errors: { path: (string | number)[]; code: string; message: string }[] = [];
  const content = body.content;
  // Discord counts code points, not UTF-16 units.
  if (typeof content === 'string' && [...content].length > 2000) errors.push({ path: ['content'], code: 'BASE_TYPE_MAX_LENGTH', message: 'Must be 2000 or fewer in length.' });
  if (Array.isArray(body.embeds) && body.embeds.length > 10) errors.push({ path: ['embeds'], code: 'BASE_TYPE_MAX_LENGTH', message: 'Must be 10 or fewer in length.' });
  const rows: any[] = Array.isArray(body.components) ? body.components : [];
  const isV2 = (Number(body.flags ?? 0) & MessageFlag.IsComponentsV2) !== 0;
  if (!isV2 && rows.length > 5) errors.push({ path: ['components'], code: 'BASE_TYPE_MAX_LENGTH', message: 'Must be 5 or fewer in length.' });
  const seen = new Set<string>();
  rows.forEach((row, r) => {
    if (isV2) return;
    if (row?.type !== 1) return errors.push({ path: ['components', r, 'type'], code: 'UNION_TYPE_CHOICES', message: 'Value of field "type" must be one of (1,).' });
    const children: any[] = Array.isArray(row.components) ? row.components : [];
    if (children.length > 5) errors.push({ path: ['components', r, 'components'], code: 'BASE_TYPE_MAX_LENGTH', message: 'Must be 5 or fewer in length.' });
    children.forEach((c, i) => {
      const at = ['components', r, 'components', i];
      if (c?.type === 2 && c.style !== 5 && c.style !== 6 && typeof c.custom_id !== 'string') errors.push({ path: [...at, 'custom_id'], code: 'BASE_TYPE_REQUIRED', message: 'This field is required' });
      if (typeof c?.custom_id === 'string') {
        if ([...c.custom_id].length > 100) errors.push({ path: [...at, 'custom_id'], code: 'BASE_TYPE_MAX_LENGTH', message: 'Must be 100 or fewer in length.' });
        if (seen.has(c.custom_id)) errors.push({ path: [...at, 'custom_id'], code: 'COMPONENT_CUSTOM_ID_DUPLICATED', message: 'Component custom id cannot be duplicated' });
        seen.add(c.custom_id);
      }
      if (typeof c?.label === 'string' && [...c.label].length > 80) errors.push({ path: [...at, 'label'], code: 'BASE_TYPE_MAX_LENGTH', message: 'Must be 80 or fewer in length.' });
    });
  });
  const empty = !content && !body.embeds?.length && !rows.length && !files && !body.sticker_ids?.length && !body.poll;
  return { errors, empty: creating && empty };
}
