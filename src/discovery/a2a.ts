/**
 * The agent card's A2A endpoint: a small, read-only JSON-RPC 2.0 server (A2A 0.3.0) whose only working method is
 * `message/send`. It answers product, pricing, CLI-install and docs questions from the same content as the MCP
 * server, deterministically, and never creates tasks.
 */
import { createHash } from 'node:crypto';
import type { Knowledge } from './knowledge.js';

export interface JsonRpcReply {
  status: number;
  payload: Record<string, unknown>;
}

type Id = string | number | null;

export const JSON_RPC = {
  parseError: -32700,
  invalidRequest: -32600,
  methodNotFound: -32601,
  invalidParams: -32602,
  internalError: -32603,
  taskNotFound: -32001,
  pushNotificationNotSupported: -32003,
  unsupportedOperation: -32004,
  contentTypeNotSupported: -32005,
  authenticatedExtendedCardNotConfigured: -32007,
} as const;

export function rpcError(id: Id, code: number, message: string, status = 200, data?: unknown): JsonRpcReply {
  return {
    status,
    payload: { jsonrpc: '2.0', id, error: { code, message, ...(data === undefined ? {} : { data }) } },
  };
}

/** A UUID-shaped id derived from the input, so the same question always yields the same reply. */
function stableId(...parts: string[]): string {
  const hex = createHash('sha256').update(parts.join('\u0000')).digest('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-5${hex.slice(13, 16)}-a${hex.slice(17, 20)}-${hex.slice(20, 32)}`;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

export function handleA2aRequest(body: unknown, knowledge: Knowledge): JsonRpcReply {
  if (!isObject(body)) return rpcError(null, JSON_RPC.invalidRequest, 'Invalid Request: send one JSON-RPC request object', 400);
  const id = typeof body.id === 'string' || typeof body.id === 'number' ? body.id : null;
  if (body.jsonrpc !== '2.0' || typeof body.method !== 'string' || id === null) {
    return rpcError(id, JSON_RPC.invalidRequest, 'Invalid Request: jsonrpc "2.0", a method and an id are required', 400);
  }
  switch (body.method) {
    case 'message/send':
      return sendMessage(id, body.params, knowledge);
    case 'message/stream':
    case 'tasks/resubscribe':
      return rpcError(id, JSON_RPC.unsupportedOperation, 'This agent does not stream; use message/send');
    case 'tasks/get':
    case 'tasks/cancel':
      return rpcError(id, JSON_RPC.taskNotFound, 'Task not found: this agent answers with messages and keeps no tasks');
    case 'tasks/pushNotificationConfig/set':
    case 'tasks/pushNotificationConfig/get':
    case 'tasks/pushNotificationConfig/list':
    case 'tasks/pushNotificationConfig/delete':
      return rpcError(id, JSON_RPC.pushNotificationNotSupported, 'Push Notification is not supported');
    case 'agent/getAuthenticatedExtendedCard':
      return rpcError(id, JSON_RPC.authenticatedExtendedCardNotConfigured, 'Authenticated Extended Card is not configured');
    default:
      return rpcError(id, JSON_RPC.methodNotFound, `Method not found: ${body.method}`);
  }
}

function sendMessage(id: Id, params: unknown, knowledge: Knowledge): JsonRpcReply {
  const message = isObject(params) ? params.message : undefined;
  if (!isObject(message) || !Array.isArray(message.parts) || typeof message.messageId !== 'string') {
    return rpcError(id, JSON_RPC.invalidParams, 'Invalid params: params.message needs a messageId and parts');
  }
  if (message.role !== 'user') return rpcError(id, JSON_RPC.invalidParams, 'Invalid params: message.role must be "user"');
  const texts = message.parts
    .filter((part): part is Record<string, unknown> => isObject(part) && part.kind === 'text' && typeof part.text === 'string')
    .map((part) => part.text as string);
  if (texts.length === 0) {
    return rpcError(id, JSON_RPC.contentTypeNotSupported, 'Incompatible content types: send the question as a text part');
  }
  const question = texts.join('\n').slice(0, 4000);
  const answer = knowledge.answer(question);
  const contextId = typeof message.contextId === 'string' ? message.contextId : stableId('context', message.messageId);
  return {
    status: 200,
    payload: {
      jsonrpc: '2.0',
      id,
      result: {
        kind: 'message',
        role: 'agent',
        messageId: stableId('reply', question),
        contextId,
        parts: [{ kind: 'text', text: answer.text }],
        metadata: { skill: answer.topic?.id ?? null },
      },
    },
  };
}
