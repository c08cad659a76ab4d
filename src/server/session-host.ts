import type { Journal } from "../journal/journal.js";
import { label, type TextFilter } from "./browser-text.js";
import { ServerError } from "./errors.js";
import type { HostedSession, SessionHooks } from "./hosted.js";
import { type LiveDeps, LiveSession } from "./live-session.js";
import type { CreateSession, LiveMessage, SessionSummary } from "./wire.js";

/**
 * The sessions this server process hosts, and the journal's record of every
 * other one (sessions that ended, `vak exec` runs, sessions of other
 * processes). Creating a session is the command's business (it knows the
 * flags, the model, the config): it hands a factory in.
 */
export type SessionFactory = (body: CreateSession, hooks: SessionHooks) => HostedSession;

/** The journal's session ids: base-36 time, a dash, 10 hex digits. */
export const SESSION_ID = /^[0-9a-z]{1,16}-[0-9a-f]{10}$/;
const MAX_LISTED = 500;

export class SessionHost {
  private readonly live = new Map<string, LiveSession>();

  constructor(
    private readonly journal: Journal,
    private readonly deps: LiveDeps & { factory?: SessionFactory | undefined },
  ) {}

  private get filter(): TextFilter {
    return this.deps.filter;
  }

  private publish(m: LiveMessage): void {
    this.deps.publish(m);
  }

  /**
   * A new session from the browser, hosted once it started (its components' state walked, in slices: the other
   * sessions are served meanwhile); its first instruction, if any, starts at once.
   */
  async create(body: CreateSession): Promise<LiveSession> {
    const factory = this.deps.factory;
    if (!factory) throw new ServerError("unsupported", "this server hosts one session and starts no others (it was started with `vak --serve`)");
    const l = new LiveSession((hooks) => factory(body, hooks), this.deps);
    await l.hosted.ready;
    this.host(l);
    if (body.prompt) void l.send(body.prompt, "web").catch(() => {});
    return l;
  }

  /** Hosts a session made elsewhere (`vak --serve` hosts the terminal's own). */
  adopt(make: (hooks: SessionHooks) => HostedSession): LiveSession {
    return this.host(new LiveSession(make, this.deps));
  }

  private host(l: LiveSession): LiveSession {
    this.live.set(l.id, l);
    this.publish({ type: "sessions" });
    return l;
  }

  get(id: string): LiveSession | undefined {
    return this.live.get(id);
  }

  /** The live session with this id, or a 404/410 that says why not. */
  async liveOrThrow(id: string): Promise<LiveSession> {
    const l = this.live.get(id);
    if (l) return l;
    if (!SESSION_ID.test(id)) throw new ServerError("not-found", "no such session");
    throw (await this.journal.session(id)) ? new ServerError("gone", "this session is not hosted by this server (it ended, or another process runs it); its record is read-only") : new ServerError("not-found", "no such session");
  }

  /** Live sessions first, then the journal's (of every host that shares it), newest first. */
  async list(): Promise<SessionSummary[]> {
    const f = this.filter;
    const rows = (await this.journal.sessions()).slice(-MAX_LISTED).reverse();
    const out: SessionSummary[] = rows.map((r) => ({
      id: r.id, kind: label(f, r.kind, 100), title: label(f, r.title, 500), workspace: r.workspace === null ? null : label(f, r.workspace),
      started: r.started, live: this.live.has(r.id), state: this.live.get(r.id)?.state(), events: r.events, ended: r.ended, outcome: r.outcome === null ? null : label(f, r.outcome, 500),
    }));
    return out.sort((a, b) => Number(b.live) - Number(a.live));
  }

  async summary(id: string): Promise<SessionSummary | undefined> {
    if (!SESSION_ID.test(id)) return undefined;
    return (await this.list()).find((s) => s.id === id);
  }

  /** Ends a hosted session: it stops, its record says so, and from then on it is the journal's (read-only). */
  async close(id: string): Promise<void> {
    const l = await this.liveOrThrow(id);
    await l.close();
    this.live.delete(id);
    this.publish({ type: "sessions" });
  }

  async closeAll(): Promise<void> {
    await Promise.allSettled([...this.live.values()].map((l) => l.close()));
  }
}
