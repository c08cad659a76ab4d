import { argsForRecord, resultForRecord } from "./call-fields.js";
import {
  checkNotification, checkRequest, checkResult, errorResponse, notification, parseEnvelope, type Params, request, type RequestId,
  resultResponse, RPC, type Side,
} from "./messages.js";
import { serverQuestion } from "./questions.js";
import { intersectRoots, type Reach, type Root } from "./roots.js";
import { ToolGate, type ToolGateDeps } from "./tools.js";

/**
 * The MCP relay between one client and one sandboxed server: every message
 * checked (messages.ts), request ids renumbered in each direction so that
 * a response can only answer a request that was sent and only once, tools
 * filtered and calls decided (tools.ts), roots intersected with the grants
 * (roots.ts), and every tools/call on the record, durably, before the server
 * sees it. It does no I/O: the edge (worker.ts) feeds it lines and carries
 * what it emits, so the whole protocol can be tested without processes.
 */
export interface RelayRecord {
  /** Resolves once the call's record is durable; rejects if it cannot be recorded. */
  call(payload: Record<string, unknown>): Promise<void>;
  result(payload: Record<string, unknown>): void;
  dropped(from: Side, problem: string, detail: Record<string, unknown>): void;
  initialized(payload: Record<string, unknown>): void;
  tools: ToolGateDeps["record"]["tools"];
  approval: ToolGateDeps["record"]["approval"];
}

export interface RelayOptions extends Pick<ToolGateDeps, "policy" | "pins" | "command" | "warn"> {
  reach: Reach;
  record: RelayRecord;
  toClient(message: Record<string, unknown>): void;
  toServer(message: Record<string, unknown>): void;
  /** Applied to the text Vak itself sends a client to show a person (the --ask question). */
  neutralise(text: string): string;
  /** Redacts a value before it goes on the record. */
  redact<T>(value: T): T;
  /** Applied to every message from the server before the client sees it: the values of the server's own secrets never reach the client (and its model). */
  scrub?: <T>(value: T) => T;
  maxPending?: number;
  askTimeoutMs?: number;
  /** Vak's own requests to the server (listing tools). */
  requestTimeoutMs?: number;
}

export type Answer = { result?: Record<string, unknown>; error?: { code: number; message: string; data?: unknown } };

/** A request sent to the server: the client's (renumbered) or Vak's own. */
interface ToServer {
  method: string;
  task: boolean;
  clientId?: RequestId;
  progress?: string;
  started: number;
  call?: { tool: string; seq: number };
  /** A tools/list that asked for a later page. */
  cursor?: boolean;
  cancelled?: boolean;
  settle?: (a: Answer) => void;
}

/** A request sent to the client: the server's (renumbered) or Vak's own (--ask). */
interface ToClient {
  method: string;
  task: boolean;
  serverId?: RequestId;
  progress?: string;
  settle?: (a: Answer) => void;
}

const key = (id: RequestId): string => (typeof id === "number" ? `n${id}` : `s${id}`);
const tokenOf = (params: Params): string | undefined => {
  const t = (params?._meta as Record<string, unknown> | undefined)?.progressToken;
  return typeof t === "string" || typeof t === "number" ? key(t) : undefined;
};
const askedForTask = (params: Params): boolean => params?.task !== undefined;

/** Which capability of the client a server request needs. */
const NEEDS: Record<string, string> = { "sampling/createMessage": "sampling", "elicitation/create": "elicitation", "roots/list": "roots" };

export class Relay {
  private readonly toServer = new Map<number, ToServer>();
  private readonly toClient = new Map<number, ToClient>();
  /** Client requests Vak holds (deciding, asking, recording): not yet sent. */
  private readonly held = new Map<string, { cancelled: boolean }>();
  /** The client's ids in use: pending at the server, or held. */
  private readonly clientIds = new Map<string, number | "held">();
  private readonly progressToServer = new Map<string, number>();
  private readonly progressToClient = new Map<string, number>();
  private nextServerId = 1;
  private nextClientId = 1;
  private calls = 0;
  private clientCaps: Record<string, unknown> = {};
  private clientInfo: unknown;
  private closed = false;
  readonly tools: ToolGate;
  private readonly max: number;

  private readonly toClientRaw: (m: Record<string, unknown>) => void;

  constructor(private readonly o: RelayOptions) {
    this.max = o.maxPending ?? 1024;
    const scrub = o.scrub;
    this.toClientRaw = scrub ? (m) => o.toClient(scrub(m)) : o.toClient;
    this.tools = new ToolGate({
      policy: o.policy, pins: o.pins, command: o.command, warn: o.warn, record: o.record,
      listPage: (cursor) => this.ask("server", "tools/list", cursor ? { cursor } : undefined, o.requestTimeoutMs ?? 30_000),
      canElicit: () => {
        const e = this.clientCaps.elicitation as Record<string, unknown> | undefined;
        return e !== undefined && (e.form !== undefined || Object.keys(e).length === 0);
      },
      elicit: (params) => this.ask("client", "elicitation/create", { ...params, message: o.neutralise(String(params.message)) }, o.askTimeoutMs ?? 300_000),
    });
  }

  // ---------------------------------------------------------------- from the client

  fromClient(line: string): void {
    if (this.closed) return;
    const m = parseEnvelope(line);
    switch (m.kind) {
      case "invalid":
        if (m.respondsTo !== undefined) return this.unreadable("client", m.reason, line.length, m.respondsTo, false);
        this.drop("client", m.reason, { bytes: line.length });
        if (m.answer) this.toClientRaw(errorResponse(m.answer.id, m.answer.code, `vak: ${m.reason}`));
        return;
      case "request":
        return this.clientRequest(m.id, m.method, m.params);
      case "notification":
        return this.clientNotification(m.method, m.params);
      default:
        return this.answerFromClient(m.id, m.kind === "result" ? { result: m.result } : { error: m.error });
    }
  }

  private clientRequest(id: RequestId, method: string, raw: Params): void {
    const c = checkRequest("client", method, raw);
    if (!c.ok) {
      this.drop("client", c.reason, { method, id });
      return this.toClientRaw(errorResponse(id, c.code, `vak: ${c.reason}`));
    }
    if (this.clientIds.has(key(id))) {
      this.drop("client", "a request id already in use", { method, id });
      return this.toClientRaw(errorResponse(id, RPC.invalidRequest, "vak: this request id is already in use by a pending request"));
    }
    if (this.toServer.size + this.held.size >= this.max) return this.toClientRaw(errorResponse(id, RPC.internal, `vak: more than ${this.max} requests are pending; wait for some to finish`));
    const params = c.value;
    if (method === "initialize") {
      this.clientCaps = (params?.capabilities as Record<string, unknown> | undefined) ?? {};
      this.clientInfo = params?.clientInfo;
    }
    if (method === "tools/call") return void this.call(id, params!);
    this.send(id, method, params);
  }

  /** Sends a client request on to the server under a fresh id. */
  private send(clientId: RequestId, method: string, params: Params, call?: { tool: string; seq: number }): void {
    const id = this.nextServerId++;
    const progress = tokenOf(params);
    this.toServer.set(id, { method, task: askedForTask(params), clientId, progress, started: performance.now(), cursor: params?.cursor !== undefined, ...(call ? { call } : {}) });
    this.clientIds.set(key(clientId), id);
    if (progress) this.progressToServer.set(progress, (this.progressToServer.get(progress) ?? 0) + 1);
    this.o.toServer(request(id, method, params));
  }

  private async call(clientId: RequestId, params: Record<string, unknown>): Promise<void> {
    const k = key(clientId);
    const hold = { cancelled: false };
    this.held.set(k, hold);
    this.clientIds.set(k, "held");
    const release = () => {
      this.held.delete(k);
      if (this.clientIds.get(k) === "held") this.clientIds.delete(k);
    };
    const tool = String(params.name);
    const seq = ++this.calls;
    const started = performance.now();
    const args = argsForRecord(params.arguments, this.o.redact);
    const base = { server: this.o.policy.server, tool, call: seq, ...args };
    let v;
    try {
      v = await this.tools.decide(tool, params.arguments);
    } catch (e) {
      v = { allowed: false as const, rule: "error", reason: (e as Error).message };
    }
    if (this.closed) return release();
    if (hold.cancelled) {
      release();
      return this.o.record.dropped("client", "cancelled before it was passed on", { tool, call: seq });
    }
    if (!v.allowed) {
      // The refusal is on the record before the client hears of it.
      await this.o.record.call({ ...base, decision: "denied", rule: v.rule, reason: v.reason, ...(v.digest ? { definition: v.digest } : {}) }).catch(() => undefined);
      release();
      if (this.closed) return;
      return this.toClientRaw(resultResponse(clientId, { content: [{ type: "text", text: `vak: refused: ${v.reason}` }], isError: true }));
    }
    try {
      // Durable before the server sees it; calls made in one turn share one commit.
      await this.o.record.call({ ...base, decision: "allowed", definition: v.digest, asked: v.asked, decidedMs: Math.round((performance.now() - started) * 1000) / 1000 });
    } catch (e) {
      release();
      return this.toClientRaw(errorResponse(clientId, RPC.internal, `vak: the call could not be recorded (${(e as Error).message}); it was not passed on`));
    }
    release();
    if (this.closed || hold.cancelled) return;
    this.send(clientId, "tools/call", params, { tool, seq });
  }

  private clientNotification(method: string, raw: Params): void {
    const c = checkNotification("client", method, raw);
    if (!c.ok) return this.drop("client", c.reason, { method });
    const params = c.value;
    if (method === "notifications/cancelled") {
      const asked = params!.requestId as RequestId | undefined;
      const where = asked === undefined ? undefined : this.clientIds.get(key(asked));
      if (where === undefined) return this.drop("client", "a cancellation of no pending request", { method });
      if (where === "held") {
        this.held.get(key(asked!))!.cancelled = true;
        return;
      }
      const entry = this.toServer.get(where);
      if (entry) entry.cancelled = true;
      return this.o.toServer(notification(method, { ...params, requestId: where }));
    }
    if (method === "notifications/progress") {
      const t = tokenOf({ _meta: { progressToken: params!.progressToken } });
      if (!t || !this.progressToClient.has(t)) return this.drop("client", "progress for no pending request", { method });
    }
    this.o.toServer(notification(method, params));
  }

  /** The client answers a request sent to it: the server's, or Vak's own. */
  private answerFromClient(id: RequestId | undefined, a: Answer): void {
    const entry = typeof id === "number" ? this.toClient.get(id) : undefined;
    if (!entry) return this.drop("client", id === undefined ? "an error response without an id" : "a response to a request never sent, or answered already", { id: id ?? null });
    this.toClient.delete(id as number);
    this.forgetToken(this.progressToClient, entry.progress);
    let answer = a;
    if (a.result) {
      const c = checkResult(entry.method, a.result, entry.task);
      if (!c.ok) {
        this.drop("client", c.reason, { method: entry.method });
        answer = { error: { code: RPC.internal, message: `vak: the client's answer did not match the MCP schema (${c.reason})` } };
      } else if (entry.method === "roots/list") {
        answer = { result: { ...c.value, roots: intersectRoots((c.value.roots as Root[]) ?? [], this.o.reach) } };
      } else answer = { result: c.value };
    }
    if (entry.settle) return entry.settle(answer);
    this.o.toServer(answer.result ? resultResponse(entry.serverId!, answer.result) : errorResponse(entry.serverId!, answer.error!.code, answer.error!.message, answer.error!.data));
  }

  // ---------------------------------------------------------------- from the server

  fromServer(line: string): void {
    if (this.closed) return;
    const m = parseEnvelope(line);
    switch (m.kind) {
      case "invalid":
        // An answer Vak cannot pass on still ends the request it answers, with an error, rather than leaving it waiting.
        if (m.respondsTo !== undefined) return this.unreadable("server", m.reason, line.length, m.respondsTo, false);
        this.drop("server", m.reason, { bytes: line.length });
        if (m.answer?.id !== undefined) this.o.toServer(errorResponse(m.answer.id, m.answer.code, `vak: ${m.reason}`));
        return;
      case "request":
        return this.serverRequest(m.id, m.method, m.params);
      case "notification":
        return this.serverNotification(m.method, m.params);
      default:
        return this.answerFromServer(m.id, m.kind === "result" ? { result: m.result } : { error: m.error });
    }
  }

  private serverRequest(serverId: RequestId, method: string, raw: Params): void {
    const c = checkRequest("server", method, raw);
    if (!c.ok) {
      this.drop("server", c.reason, { method });
      return this.o.toServer(errorResponse(serverId, c.code, `vak: ${c.reason}`));
    }
    const need = NEEDS[method];
    if (need && this.clientCaps[need] === undefined)
      return this.o.toServer(errorResponse(serverId, RPC.methodNotFound, `vak: the client did not declare ${need}, so ${method} is not passed on`));
    if (this.toClient.size >= this.max) return this.o.toServer(errorResponse(serverId, RPC.internal, `vak: more than ${this.max} requests to the client are pending`));
    const id = this.nextClientId++;
    let params = c.value;
    // What the server asks a person is labelled as the server's, so that it cannot pass for Vak's own --ask.
    if (method === "elicitation/create" && params) {
      const q = serverQuestion(this.o.policy.server, params, this.o.neutralise);
      if (!q.ok) {
        this.drop("server", q.reason, { method });
        return this.o.toServer(errorResponse(serverId, RPC.invalidParams, `vak: ${q.reason}`));
      }
      params = q.params;
    }
    const progress = tokenOf(params);
    this.toClient.set(id, { method, task: askedForTask(params), serverId, progress });
    if (progress) this.progressToClient.set(progress, (this.progressToClient.get(progress) ?? 0) + 1);
    this.toClientRaw(request(id, method, params));
  }

  private serverNotification(method: string, raw: Params): void {
    const c = checkNotification("server", method, raw);
    if (!c.ok) return this.drop("server", c.reason, { method });
    const params = c.value;
    if (method === "notifications/cancelled") {
      const asked = params!.requestId as RequestId | undefined;
      const ours = [...this.toClient].find(([, e]) => e.serverId !== undefined && asked !== undefined && key(e.serverId) === key(asked));
      if (!ours) return this.drop("server", "a cancellation of no pending request", { method });
      this.toClient.delete(ours[0]);
      this.forgetToken(this.progressToClient, ours[1].progress);
      return this.toClientRaw(notification(method, { ...params, requestId: ours[0] }));
    }
    if (method === "notifications/progress") {
      const t = tokenOf({ _meta: { progressToken: params!.progressToken } });
      if (!t || !this.progressToServer.has(t)) return this.drop("server", "progress for no pending request", { method });
    }
    if (method === "notifications/tools/list_changed") this.tools.listChanged();
    this.toClientRaw(notification(method, params));
  }

  /** The server answers a request: the client's, or Vak's own. Anything else was never asked. */
  private answerFromServer(id: RequestId | undefined, a: Answer): void {
    const entry = typeof id === "number" ? this.toServer.get(id) : undefined;
    if (!entry) return this.drop("server", id === undefined ? "an error response without an id" : "a response to a request never sent, or answered already", { id: id ?? null });
    this.toServer.delete(id as number);
    if (entry.clientId !== undefined) this.clientIds.delete(key(entry.clientId));
    this.forgetToken(this.progressToServer, entry.progress);
    let answer = a;
    if (a.result) {
      const c = checkResult(entry.method, a.result, entry.task);
      if (!c.ok) {
        this.drop("server", c.reason, { method: entry.method });
        answer = { error: { code: RPC.internal, message: `vak: the server's answer to ${entry.method} did not match the MCP schema (${c.reason}); it was not passed on` } };
      } else answer = { result: c.value };
    }
    if (entry.call) this.recordResult(entry, answer);
    if (entry.settle) return entry.settle(answer);
    if (entry.cancelled) return; // the client asked for no answer
    if (answer.result && entry.method === "initialize") {
      const r = this.tools.initializeResult(answer.result);
      this.recordInitialized(answer.result, r.withheld);
      answer = { result: r.result };
    }
    if (answer.result && entry.method === "tools/list") answer = { result: this.tools.filterPage(answer.result, !entry.cursor) };
    this.toClientRaw(answer.result ? resultResponse(entry.clientId!, answer.result) : errorResponse(entry.clientId!, answer.error!.code, answer.error!.message, answer.error!.data));
  }

  private recordResult(entry: ToServer, a: Answer): void {
    this.o.record.result({
      server: this.o.policy.server, tool: entry.call!.tool, call: entry.call!.seq, cancelled: entry.cancelled === true,
      ...resultForRecord(a, this.o.redact), durationMs: Math.round((performance.now() - entry.started) * 1000) / 1000,
    });
  }

  private recordInitialized(result: Record<string, unknown>, instructionsWithheld: boolean): void {
    this.o.record.initialized({
      instructions: typeof result.instructions !== "string" ? "none" : instructionsWithheld ? "withheld" : "passed",
      client: this.o.redact({ info: this.clientInfo ?? null, capabilities: this.clientCaps }),
      server: this.o.redact({ info: result.serverInfo ?? null, capabilities: result.capabilities ?? null, protocolVersion: result.protocolVersion ?? null }),
    });
  }

  // ---------------------------------------------------------------- Vak's own requests

  /** Sends Vak's own request to one side and waits for its answer (bounded in time). */
  private ask(to: Side, method: string, params: Params, timeoutMs: number): Promise<Record<string, unknown>> {
    if (this.closed) return Promise.reject(new Error("the connection is closed"));
    return new Promise((resolve, reject) => {
      const id = to === "server" ? this.nextServerId++ : this.nextClientId++;
      const timer = setTimeout(() => {
        (to === "server" ? this.toServer : this.toClient).delete(id);
        (to === "server" ? this.o.toServer : this.toClientRaw)(notification("notifications/cancelled", { requestId: id, reason: "timed out" }));
        reject(new Error(`${method} was not answered within ${timeoutMs / 1000} s`));
      }, timeoutMs);
      const settle = (a: Answer) => {
        clearTimeout(timer);
        if (a.result) resolve(a.result);
        else reject(new Error(a.error?.message ?? "no answer"));
      };
      if (to === "server") this.toServer.set(id, { method, task: false, started: performance.now(), settle });
      else this.toClient.set(id, { method, task: false, settle });
      (to === "server" ? this.o.toServer : this.toClientRaw)(request(id, method, params));
    });
  }

  // ---------------------------------------------------------------- edges

  /** A line over the size limit, or not UTF-8: dropped; its sender's request, when Vak can tell which, is answered with an error. */
  unreadable(from: Side, problem: string, bytes: number, id?: RequestId, isRequest?: boolean): void {
    this.drop(from, problem, { bytes });
    if (id === undefined) return;
    if (from === "client") {
      if (isRequest && !this.clientIds.has(key(id))) this.toClientRaw(errorResponse(id, RPC.invalidRequest, `vak: ${problem}; the request was dropped`));
      else if (!isRequest && typeof id === "number" && this.toClient.has(id))
        this.answerFromClient(id, { error: { code: RPC.internal, message: `vak: the client's answer was dropped: ${problem}` } });
    } else if (typeof id === "number" && this.toServer.has(id))
      // Whatever the line looked like, an id Vak is waiting on means the answer is not coming.
      this.answerFromServer(id, { error: { code: RPC.internal, message: `vak: the server's answer was dropped: ${problem}` } });
  }

  /** The server is gone: every request it had is answered with an error, and Vak's own are failed. */
  close(reason: string): void {
    if (this.closed) return;
    this.closed = true;
    for (const [, e] of this.toServer) {
      if (e.settle) e.settle({ error: { code: -32000, message: reason } });
      else if (!e.cancelled && e.clientId !== undefined) this.toClientRaw(errorResponse(e.clientId, -32000, `vak: ${reason}`));
      if (e.call) this.o.record.result({ server: this.o.policy.server, tool: e.call.tool, call: e.call.seq, ok: false, error: reason });
    }
    for (const [, e] of this.toClient) e.settle?.({ error: { code: -32000, message: reason } });
    for (const [k] of this.held) {
      const id = k.startsWith("n") ? Number(k.slice(1)) : k.slice(1);
      this.toClientRaw(errorResponse(id, -32000, `vak: ${reason}`));
    }
    this.toServer.clear();
    this.toClient.clear();
    this.held.clear();
  }

  private forgetToken(table: Map<string, number>, t: string | undefined): void {
    if (!t) return;
    const n = (table.get(t) ?? 1) - 1;
    if (n <= 0) table.delete(t);
    else table.set(t, n);
  }

  private drop(from: Side, problem: string, detail: Record<string, unknown>): void {
    this.o.record.dropped(from, problem, detail);
  }
}
