import { render } from "preact";
import { useEffect, useState } from "preact/hooks";
import type { SessionSummary } from "../wire.js";
import { ApiError, get, post } from "./api.js";
import { feed } from "./feed.js";
import { Login } from "./login.js";
import { SessionView } from "./session.js";
import { NewSession, SessionList } from "./sessions.js";
import "./style.css";

/**
 * The vak web client. Routes live in the URL's fragment (#/s/ID, #/s/ID/reach,
 * #/s/ID/calls), so the server serves one page and never maps a path to a file.
 * Everything shown that a model, a tool or a command chose is text: this code
 * never builds HTML from strings.
 */
type Route = { view: "home" } | { view: "session"; id: string; tab: "chat" | "reach" | "calls" };

function route(): Route {
  const m = /^#\/s\/([0-9a-z]{1,16}-[0-9a-f]{10})(?:\/(reach|calls))?$/.exec(location.hash);
  return m ? { view: "session", id: m[1]!, tab: (m[2] as "reach" | "calls" | undefined) ?? "chat" } : { view: "home" };
}

function App() {
  const [info, setInfo] = useState<Record<string, unknown> | undefined>();
  const [out, setOut] = useState<string | undefined>();
  const [sessions, setSessions] = useState<SessionSummary[]>([]);
  const [r, setRoute] = useState<Route>(route());

  const loadSessions = () => get<{ sessions: SessionSummary[] }>("sessions").then((x) => setSessions(x.sessions), () => undefined);
  const start = async () => {
    try {
      setInfo(await get<Record<string, unknown>>("info"));
      setOut(undefined);
      void loadSessions();
      feed.start();
    } catch (e) {
      setOut(e instanceof ApiError && e.status === 401 ? "You are not logged in." : e instanceof Error ? e.message : String(e));
    }
  };
  useEffect(() => {
    void start();
    const onHash = () => setRoute(route());
    addEventListener("hashchange", onHash);
    // New events change the list's counts: reloaded at most every 2 s for them.
    let pending: ReturnType<typeof setTimeout> | undefined;
    const soon = () => (pending ??= setTimeout(() => {
      pending = undefined;
      void loadSessions();
    }, 2000));
    const off = feed.on((m) => {
      if (m.type === "sessions" || m.type === "connected") void loadSessions();
      else if (m.type === "events") soon();
      else if (m.type === "state") setSessions((old) => old.map((s) => (s.id === m.session ? { ...s, state: m.state } : s)));
    });
    return () => {
      removeEventListener("hashchange", onHash);
      off();
    };
  }, []);

  if (out !== undefined) return <Login reason={out} onIn={() => void start()} />;
  if (!info) return <p class="muted">Loading…</p>;
  const current = r.view === "session" ? r.id : undefined;
  const logout = async () => {
    await post("logout").catch(() => undefined);
    feed.stop();
    location.reload();
  };
  return (
    <div class="layout">
      <header class="top">
        <a class="brand" href="#/">vak</a>
        <span class="muted">{String(info.workspace ?? "")}</span>
        {info.exposed ? <span class="badge warn">exposed beyond this machine</span> : null}
        <button type="button" class="link" onClick={logout}>Log out</button>
      </header>
      <SessionList sessions={sessions} current={current} />
      <main id="main">
        {r.view === "session"
          ? <SessionView key={r.id} id={r.id} tab={r.tab} summary={sessions.find((s) => s.id === r.id)} />
          : <NewSession info={info} onCreated={(id) => { void loadSessions(); location.hash = `#/s/${id}`; }} />}
      </main>
    </div>
  );
}

render(<App />, document.getElementById("app")!);
