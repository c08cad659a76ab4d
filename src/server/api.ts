import type { Context } from "hono";
import { Hono } from "hono";
import type { z } from "zod";
import type { Journal } from "../journal/journal.js";
import type { ServerAuth } from "./auth.js";
import type { TextFilter } from "./browser-text.js";
import { ServerError } from "./errors.js";
import { eventView, transcriptFromJournal } from "./journal-view.js";
import type { Env } from "./middleware.js";
import { SESSION_ID, type SessionHost } from "./session-host.js";
import { ApprovalAnswerBody, CreateSessionBody, EventsQuery, LoginBody, MessageBody, ModeBody, type ReachView, type VerifyView } from "./wire.js";

/**
 * The API under /api/: every body through its schema, every answer JSON.
 * The routes only translate: what a session may do is decided by the
 * session (its broker and gate), never here.
 */
export interface ApiDeps {
  sessions: SessionHost;
  journal: Journal;
  auth: ServerAuth;
  filter: TextFilter;
  info: () => Record<string, unknown>;
  /** The live feed's position now: answers the feed later changes carry it (hub.ts). */
  feedPosition: () => number;
}

async function body<T extends z.ZodType>(c: Context<Env>, schema: T): Promise<z.infer<T>> {
  let data: unknown;
  try {
    const text = await c.req.text();
    data = text === "" ? {} : JSON.parse(text);
  } catch {
    throw new ServerError("bad-request", "the body is not JSON");
  }
  const r = schema.safeParse(data);
  if (!r.success) {
    const i = r.error.issues[0]!;
    throw new ServerError("bad-request", `${i.path.join(".") || "(body)"}: ${i.message}`);
  }
  return r.data;
}

function sessionId(c: Context<Env>): string {
  const id = c.req.param("id") ?? "";
  if (!SESSION_ID.test(id)) throw new ServerError("not-found", "no such session");
  return id;
}

export function api(d: ApiDeps): Hono<Env> {
  const app = new Hono<Env>();
  let verified: { at: number; seq: number; view: VerifyView } | undefined;

  app.post("/login", async (c) => {
    const { token } = await body(c, LoginBody);
    const refused = d.auth.check("login-form", c.env.incoming.socket.remoteAddress ?? "unknown", () => d.auth.tokenMatches(token));
    if (refused) {
      if (refused.retryAfterS) c.header("Retry-After", String(refused.retryAfterS));
      return c.json({ error: { code: refused.status === 429 ? "rate-limited" : "unauthorized", message: refused.reason } }, refused.status);
    }
    c.header("Set-Cookie", d.auth.newSession());
    return c.body(null, 204);
  });
  app.post("/logout", (c) => {
    c.header("Set-Cookie", d.auth.endSession(c.req.header("cookie")));
    return c.body(null, 204);
  });
  app.get("/info", (c) => c.json(d.info()));

  app.get("/sessions", async (c) => c.json({ sessions: await d.sessions.list() }));
  app.post("/sessions", async (c) => {
    const b = await body(c, CreateSessionBody);
    const l = await d.sessions.create(b);
    return c.json({ id: l.id, state: l.state() }, 201);
  });
  app.get("/sessions/:id", async (c) => {
    const s = await d.sessions.summary(sessionId(c));
    if (!s) throw new ServerError("not-found", "no such session");
    // The summary waited on the journal: a live session's state is read again, in one turn with the position (hub.ts).
    const l = d.sessions.get(s.id);
    return c.json({ ...s, ...(l ? { state: l.state() } : {}), feed: d.feedPosition() });
  });
  app.get("/sessions/:id/messages", async (c) => {
    const id = sessionId(c);
    const l = d.sessions.get(id);
    if (l) return c.json({ live: true, items: l.messages(), feed: d.feedPosition() });
    if (!(await d.journal.session(id))) throw new ServerError("not-found", "no such session");
    return c.json({ live: false, items: transcriptFromJournal(await d.journal.events(id), d.filter) });
  });
  app.post("/sessions/:id/messages", async (c) => {
    const l = await d.sessions.liveOrThrow(sessionId(c));
    const { text } = await body(c, MessageBody);
    void l.send(text, "web").catch(() => {});
    return c.json({ state: l.state() }, 202);
  });
  app.post("/sessions/:id/cancel", async (c) => {
    const l = await d.sessions.liveOrThrow(sessionId(c));
    return c.json({ cancelled: l.cancel("the browser") });
  });
  app.post("/sessions/:id/close", async (c) => {
    await d.sessions.close(sessionId(c));
    return c.json({ closed: true });
  });
  app.get("/sessions/:id/approvals", async (c) => {
    const l = await d.sessions.liveOrThrow(sessionId(c));
    // The cards and the position read together, in one turn (hub.ts).
    return c.json({ approvals: l.approvals(), feed: d.feedPosition() });
  });
  app.post("/sessions/:id/approvals", async (c) => {
    const l = await d.sessions.liveOrThrow(sessionId(c));
    const a = await body(c, ApprovalAnswerBody);
    const r = l.answer(a, "web");
    if (!r.ok) throw new ServerError("conflict", `that answer does not count: ${r.reason}`);
    return c.json({ ok: true });
  });
  app.get("/sessions/:id/reach", async (c) => {
    const l = await d.sessions.liveOrThrow(sessionId(c));
    const st = l.state();
    const view: ReachView = { session: l.id, kind: l.hosted.kind, mode: st.mode, generation: st.generation, workspace: d.filter(l.hosted.workspace), components: l.hosted.reach().map((r) => filterReach(r, d.filter)) };
    return c.json(view);
  });
  app.post("/sessions/:id/mode", async (c) => {
    const l = await d.sessions.liveOrThrow(sessionId(c));
    const { mode } = await body(c, ModeBody);
    // Answered only once everything of the old generation has stopped.
    await l.setMode(mode, "the browser");
    // The state and the position read together, in one turn: what the answer says is exactly the feed up to it.
    return c.json({ state: l.state(), feed: d.feedPosition() });
  });
  app.get("/sessions/:id/events", async (c) => {
    const id = sessionId(c);
    const q = EventsQuery.safeParse(c.req.query());
    if (!q.success) throw new ServerError("bad-request", `${q.error.issues[0]!.path.join(".")}: ${q.error.issues[0]!.message}`);
    if (!(await d.journal.session(id))) throw new ServerError("not-found", "no such session");
    await d.journal.flush();
    const events = (await d.journal.events(id, { after: q.data.after, limit: q.data.limit })).map((e) => eventView(e, d.filter));
    return c.json({ events, next: events.length === q.data.limit ? events[events.length - 1]!.sessionSeq : null });
  });
  app.get("/journal/verify", async (c) => {
    // What has been written, cheaply: a verify is walked again once that changes (or after 10 s).
    const seq = (await d.journal.sessions()).reduce((n, s) => n + s.events + 1, 0);
    if (!verified || verified.seq !== seq || Date.now() - verified.at > 10_000) {
      const v = await d.journal.verify();
      verified = { at: Date.now(), seq, view: { ok: v.ok, events: v.events, problem: v.ok ? undefined : d.filter(v.problem), checkedAt: new Date().toISOString() } };
    }
    return c.json(verified.view);
  });
  return app;
}

function filterReach<T>(v: T, f: TextFilter): T {
  return JSON.parse(JSON.stringify(v, (_k, x: unknown) => (typeof x === "string" ? f(x) : x))) as T;
}
