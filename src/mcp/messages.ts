import {
  CallToolRequestSchema, CallToolResultSchema, CancelledNotificationSchema, CancelTaskRequestSchema, CancelTaskResultSchema,
  CompleteRequestSchema, CompleteResultSchema, CreateMessageRequestSchema, CreateMessageResultSchema,
  CreateMessageResultWithToolsSchema, CreateTaskResultSchema, ElicitationCompleteNotificationSchema, ElicitRequestSchema,
  ElicitResultSchema, EmptyResultSchema, GetPromptRequestSchema, GetPromptResultSchema, GetTaskPayloadRequestSchema,
  GetTaskPayloadResultSchema, GetTaskRequestSchema, GetTaskResultSchema, InitializedNotificationSchema, InitializeRequestSchema,
  InitializeResultSchema, JSONRPCErrorResponseSchema, JSONRPCNotificationSchema, JSONRPCRequestSchema,
  JSONRPCResultResponseSchema, ListPromptsRequestSchema, ListPromptsResultSchema, ListResourcesRequestSchema,
  ListResourcesResultSchema, ListResourceTemplatesRequestSchema, ListResourceTemplatesResultSchema, ListRootsRequestSchema,
  ListRootsResultSchema, ListTasksRequestSchema, ListTasksResultSchema, ListToolsRequestSchema, ListToolsResultSchema,
  LoggingMessageNotificationSchema, PingRequestSchema, ProgressNotificationSchema, PromptListChangedNotificationSchema,
  ReadResourceRequestSchema, ReadResourceResultSchema, ResourceListChangedNotificationSchema,
  ResourceUpdatedNotificationSchema, RootsListChangedNotificationSchema, SetLevelRequestSchema, SubscribeRequestSchema,
  TaskStatusNotificationSchema, ToolListChangedNotificationSchema, UnsubscribeRequestSchema,
} from "@modelcontextprotocol/sdk/types.js";
import type { z } from "zod";

/**
 * Every message that crosses `vak mcp`, in either direction, is checked here
 * against the MCP SDK's own schemas: first the JSON-RPC envelope, then the
 * method's request, notification or result schema for the side that sent it.
 * What passes is the parsed value, and that (re-serialised) is what is passed
 * on: never the original bytes, so a duplicate key or a field no schema knows
 * cannot mean one thing here and another to the receiver.
 */
export type Side = "client" | "server";
export type RequestId = string | number;
export type Params = Record<string, unknown> | undefined;

export type Envelope =
  | { kind: "request"; id: RequestId; method: string; params: Params }
  | { kind: "notification"; method: string; params: Params }
  | { kind: "result"; id: RequestId; result: Record<string, unknown> }
  | { kind: "error"; id: RequestId | undefined; error: { code: number; message: string; data?: unknown } }
  /**
   * answer: the JSON-RPC error to send back, when JSON-RPC says there is one to send.
   * respondsTo: the id of a response that cannot be passed on, so that the request it answers fails instead of waiting.
   */
  | { kind: "invalid"; reason: string; answer?: { id: RequestId | undefined; code: number }; respondsTo?: RequestId };

/** JSON-RPC's error codes, as MCP uses them. */
export const RPC = { parse: -32700, invalidRequest: -32600, methodNotFound: -32601, invalidParams: -32602, internal: -32603 } as const;

type Schema = z.ZodType;

/** Requests each side may send, by method. */
const REQUESTS: Record<Side, Record<string, Schema>> = {
  client: {
    ping: PingRequestSchema, initialize: InitializeRequestSchema, "completion/complete": CompleteRequestSchema,
    "logging/setLevel": SetLevelRequestSchema, "prompts/get": GetPromptRequestSchema, "prompts/list": ListPromptsRequestSchema,
    "resources/list": ListResourcesRequestSchema, "resources/templates/list": ListResourceTemplatesRequestSchema,
    "resources/read": ReadResourceRequestSchema, "resources/subscribe": SubscribeRequestSchema,
    "resources/unsubscribe": UnsubscribeRequestSchema, "tools/call": CallToolRequestSchema, "tools/list": ListToolsRequestSchema,
    "tasks/get": GetTaskRequestSchema, "tasks/result": GetTaskPayloadRequestSchema, "tasks/list": ListTasksRequestSchema,
    "tasks/cancel": CancelTaskRequestSchema,
  },
  server: {
    ping: PingRequestSchema, "sampling/createMessage": CreateMessageRequestSchema, "elicitation/create": ElicitRequestSchema,
    "roots/list": ListRootsRequestSchema, "tasks/get": GetTaskRequestSchema, "tasks/result": GetTaskPayloadRequestSchema,
    "tasks/list": ListTasksRequestSchema, "tasks/cancel": CancelTaskRequestSchema,
  },
};

const NOTIFICATIONS: Record<Side, Record<string, Schema>> = {
  client: {
    "notifications/cancelled": CancelledNotificationSchema, "notifications/progress": ProgressNotificationSchema,
    "notifications/initialized": InitializedNotificationSchema, "notifications/roots/list_changed": RootsListChangedNotificationSchema,
    "notifications/tasks/status": TaskStatusNotificationSchema,
  },
  server: {
    "notifications/cancelled": CancelledNotificationSchema, "notifications/progress": ProgressNotificationSchema,
    "notifications/message": LoggingMessageNotificationSchema, "notifications/resources/updated": ResourceUpdatedNotificationSchema,
    "notifications/resources/list_changed": ResourceListChangedNotificationSchema,
    "notifications/tools/list_changed": ToolListChangedNotificationSchema,
    "notifications/prompts/list_changed": PromptListChangedNotificationSchema,
    "notifications/tasks/status": TaskStatusNotificationSchema,
    "notifications/elicitation/complete": ElicitationCompleteNotificationSchema,
  },
};

/** The result schemas a response to each method must match. A request that asked for a task may be answered with one. */
const RESULTS: Record<string, Schema[]> = {
  ping: [EmptyResultSchema], initialize: [InitializeResultSchema], "completion/complete": [CompleteResultSchema],
  "logging/setLevel": [EmptyResultSchema], "prompts/get": [GetPromptResultSchema], "prompts/list": [ListPromptsResultSchema],
  "resources/list": [ListResourcesResultSchema], "resources/templates/list": [ListResourceTemplatesResultSchema],
  "resources/read": [ReadResourceResultSchema], "resources/subscribe": [EmptyResultSchema], "resources/unsubscribe": [EmptyResultSchema],
  "tools/call": [CallToolResultSchema], "tools/list": [ListToolsResultSchema], "tasks/get": [GetTaskResultSchema],
  "tasks/result": [GetTaskPayloadResultSchema], "tasks/list": [ListTasksResultSchema], "tasks/cancel": [CancelTaskResultSchema],
  "sampling/createMessage": [CreateMessageResultSchema, CreateMessageResultWithToolsSchema], "elicitation/create": [ElicitResultSchema],
  "roots/list": [ListRootsResultSchema],
};
const TASK_AUGMENTABLE = new Set(["tools/call", "sampling/createMessage", "elicitation/create"]);

/** A short account of why a value failed its schema: the first issue's path and message. */
function issue(e: z.ZodError): string {
  const i = e.issues[0];
  if (!i) return "does not match the schema";
  const path = i.path.length ? i.path.map(String).join(".").slice(0, 120) : "(message)";
  return `${path}: ${i.message.slice(0, 200)}`;
}

/**
 * How deep a message may nest: far more than any tool's schema needs, far less than what makes a
 * recursive walk (JSON.stringify when a message is passed on, the pins' canonical JSON) overflow the
 * stack. JSON.parse itself is not recursive, so one line of brackets would otherwise take Vak down.
 */
export const MAX_DEPTH = 100;

/** Whether a parsed value nests deeper than max (objects and arrays), walked without recursion. */
export function deeperThan(v: unknown, max: number): boolean {
  const stack: [unknown, number][] = [[v, 1]];
  while (stack.length > 0) {
    const [x, depth] = stack.pop()!;
    if (depth > max) return true;
    for (const c of Array.isArray(x) ? x : Object.values(x as object)) if (typeof c === "object" && c !== null) stack.push([c, depth + 1]);
  }
  return false;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);
const validId = (v: unknown): v is RequestId => typeof v === "string" || (typeof v === "number" && Number.isSafeInteger(v));

/** Parses one line and checks its JSON-RPC envelope (not yet the method's own schema). */
export function parseEnvelope(line: string): Envelope {
  let v: unknown;
  try {
    v = JSON.parse(line);
  } catch {
    return { kind: "invalid", reason: "not JSON", answer: { id: undefined, code: RPC.parse } };
  }
  if (!isObject(v)) return { kind: "invalid", reason: Array.isArray(v) ? "a JSON-RPC batch (MCP has none)" : "not a JSON object", answer: { id: undefined, code: RPC.invalidRequest } };
  const id = validId(v.id) ? v.id : undefined;
  if (deeperThan(v, MAX_DEPTH)) {
    const reason = `a message nested deeper than ${MAX_DEPTH} levels`;
    if (!("method" in v)) return { kind: "invalid", reason, ...(id !== undefined ? { respondsTo: id } : {}) };
    return { kind: "invalid", reason, ...("id" in v && id !== undefined ? { answer: { id, code: RPC.invalidRequest } } : {}) };
  }
  if ("method" in v) {
    const schema = "id" in v ? JSONRPCRequestSchema : JSONRPCNotificationSchema;
    const r = schema.safeParse(v);
    // A request we cannot read still gets an answer, if its id can be read.
    if (!r.success) return { kind: "invalid", reason: `bad ${"id" in v ? "request" : "notification"}: ${issue(r.error)}`, ...("id" in v && id !== undefined ? { answer: { id, code: RPC.invalidRequest } } : {}) };
    const m = r.data as { id?: RequestId; method: string; params?: Record<string, unknown> };
    return m.id !== undefined ? { kind: "request", id: m.id, method: m.method, params: m.params } : { kind: "notification", method: m.method, params: m.params };
  }
  if ("error" in v) {
    const r = JSONRPCErrorResponseSchema.safeParse(v);
    if (!r.success) return { kind: "invalid", reason: `bad error response: ${issue(r.error)}`, ...(id !== undefined ? { respondsTo: id } : {}) };
    return { kind: "error", id: r.data.id, error: r.data.error };
  }
  const r = JSONRPCResultResponseSchema.safeParse(v);
  if (!r.success) return { kind: "invalid", reason: `bad response: ${issue(r.error)}`, ...(id !== undefined ? { respondsTo: id } : {}) };
  return { kind: "result", id: r.data.id, result: r.data.result as Record<string, unknown> };
}

export type Checked<T> = { ok: true; value: T } | { ok: false; code: number; reason: string };

/** Checks a request's method and params against the schema for the side that sent it. */
export function checkRequest(from: Side, method: string, params: Params): Checked<Params> {
  const schema = Object.hasOwn(REQUESTS[from], method) ? REQUESTS[from][method] : undefined;
  if (!schema) return { ok: false, code: RPC.methodNotFound, reason: `${from === "client" ? "a client" : "a server"} may not send ${method.slice(0, 80)}` };
  const r = schema.safeParse(params === undefined ? { method } : { method, params });
  if (!r.success) return { ok: false, code: RPC.invalidParams, reason: `${method}: ${issue(r.error)}` };
  return { ok: true, value: (r.data as { params?: Record<string, unknown> }).params };
}

export function checkNotification(from: Side, method: string, params: Params): Checked<Params> {
  const schema = Object.hasOwn(NOTIFICATIONS[from], method) ? NOTIFICATIONS[from][method] : undefined;
  if (!schema) return { ok: false, code: RPC.methodNotFound, reason: `${from === "client" ? "a client" : "a server"} may not send ${method.slice(0, 80)}` };
  const r = schema.safeParse(params === undefined ? { method } : { method, params });
  if (!r.success) return { ok: false, code: RPC.invalidParams, reason: `${method}: ${issue(r.error)}` };
  return { ok: true, value: (r.data as { params?: Record<string, unknown> }).params };
}

/** Checks a result against the schema of the method it answers (a task, if the request asked for one). */
export function checkResult(method: string, result: Record<string, unknown>, askedForTask: boolean): Checked<Record<string, unknown>> {
  const schemas = [...(RESULTS[method] ?? []), ...(askedForTask && TASK_AUGMENTABLE.has(method) ? [CreateTaskResultSchema] : [])];
  let first: z.ZodError | undefined;
  for (const s of schemas) {
    const r = s.safeParse(result);
    if (r.success) return { ok: true, value: r.data as Record<string, unknown> };
    first ??= r.error;
  }
  return { ok: false, code: RPC.internal, reason: `the result of ${method} ${first ? issue(first) : "has no schema"}` };
}

/** The wire form of a message: one line. */
export function frame(message: Record<string, unknown>): string {
  return `${JSON.stringify(message)}\n`;
}

export function request(id: RequestId, method: string, params: Params): Record<string, unknown> {
  return params === undefined ? { jsonrpc: "2.0", id, method } : { jsonrpc: "2.0", id, method, params };
}

export function notification(method: string, params: Params): Record<string, unknown> {
  return params === undefined ? { jsonrpc: "2.0", method } : { jsonrpc: "2.0", method, params };
}

export function resultResponse(id: RequestId, result: Record<string, unknown>): Record<string, unknown> {
  return { jsonrpc: "2.0", id, result };
}

export function errorResponse(id: RequestId | undefined, code: number, message: string, data?: unknown): Record<string, unknown> {
  const error = data === undefined ? { code, message } : { code, message, data };
  return id === undefined ? { jsonrpc: "2.0", error } : { jsonrpc: "2.0", id, error };
}
