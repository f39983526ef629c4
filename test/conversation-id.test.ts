import { describe, expect, it } from 'vitest';
import { chatConversationId, cronConversationId, heartbeatConversationId, parseConversationId } from '../src/conversation-id.ts';

describe('conversation ids', () => {
  it('are built and read back in one place', () => {
    expect(parseConversationId(chatConversationId('ana', 'telegram', '-1001', '7'))).toEqual({ kind: 'chat', persona: 'ana', connector: 'telegram', chat: '-1001', thread: '7' });
    expect(parseConversationId(chatConversationId('ana', 'slack', 'C1'))).toEqual({ kind: 'chat', persona: 'ana', connector: 'slack', chat: 'C1' });
    expect(parseConversationId(heartbeatConversationId('ana'))).toEqual({ kind: 'heartbeat', persona: 'ana' });
    expect(parseConversationId(cronConversationId('ana', 'digest'))).toEqual({ kind: 'cron', persona: 'ana', name: 'digest' });
    const fresh = cronConversationId('ana', 'digest', { at: new Date('2026-12-01T09:00:00Z'), random: '1a2b3c4d-e5f6' });
    expect(fresh).toBe('ana:cron:digest:202612010900-1a2b3c4d');
    expect(parseConversationId(fresh)).toEqual({ kind: 'cron', persona: 'ana', name: 'digest', run: '202612010900-1a2b3c4d' });
  });

  it('a thread id that holds a colon stays whole', () => {
    expect(parseConversationId('ana:slack:C1:1712345678.0001:x')).toMatchObject({ chat: 'C1', thread: '1712345678.0001:x' });
  });

  it('an id that says nothing is undefined', () => {
    expect(parseConversationId('ana')).toBeUndefined();
    expect(parseConversationId('ana:telegram')).toBeUndefined();
  });
});
