import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { AgentSession } from "../../src/agent/agent-session.js";
import { Broker } from "../../src/broker/broker.js";
import { parseNetGrants } from "../../src/policy/net-grants.js";
import type { Journal } from "../../src/journal/journal.js";
import { openJournal } from "../../src/journal/open.js";
import { ScriptedClient } from "../../src/model/scripted.js";
import type { InjectedSecret } from "../../src/secrets/grant.js";
import { Redactor } from "../../src/secrets/redact.js";
import { parseRef, resolveRef, SecretStore } from "../../src/secrets/store.js";
import { scratch, type Scratch } from "../support/fs.js";
import { runVak, TEST_STATE } from "../support/vak.js";

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "vak-test-secrets-"));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

describe("the secret store", () => {
  it("is created 0600 and gives values back only to the host", () => {
    const store = new SecretStore(join(dir, "cfg", "secrets.json"));
    store.set("github", "ghp_value_0123456789");
    expect(statSync(store.path).mode & 0o777).toBe(0o600);
    expect(statSync(join(dir, "cfg")).mode & 0o777).toBe(0o700);
    expect(store.names()).toEqual(["github"]);
    expect(resolveRef(parseRef("secret:github"), { store })).toBe("ghp_value_0123456789");
    expect(store.remove("github")).toBe(true);
    expect(store.names()).toEqual([]);
  });

  it("refuses a store file that others can read, or a symlink, and says how to fix it", () => {
    const store = new SecretStore(join(dir, "secrets.json"));
    store.set("a", "value-aaaaaaaa");
    chmodSync(store.path, 0o644);
    expect(() => store.get("a")).toThrow(/readable by others \(mode 0644\).*chmod 600/);
    chmodSync(store.path, 0o640);
    expect(() => store.get("a")).toThrow(/readable by others/);
    chmodSync(store.path, 0o600);
    symlinkSync(store.path, join(dir, "link.json"));
    expect(() => new SecretStore(join(dir, "link.json")).get("a")).toThrow(/symbolic link/);
  });

  it("a missing secret fails closed, naming the reference and never a value", () => {
    const store = new SecretStore(join(dir, "secrets.json"));
    store.set("present", "the-present-value");
    expect(() => resolveRef(parseRef("secret:absent"), { store })).toThrow(/secret:absent: no such secret.*vak secret set absent/);
    expect(() => resolveRef(parseRef("env:VAK_NO_SUCH_VAR"), { env: {} })).toThrow(/env:VAK_NO_SUCH_VAR/);
    expect(() => resolveRef(parseRef("cmd:pw"), { commands: {} })).toThrow(/cmd:pw: no command named pw/);
    expect(() => resolveRef(parseRef("cmd:pw"), { commands: { pw: ["/bin/sh", "-c", "echo the-leaked-value; exit 3"] } })).toThrow(/failed/);
    try {
      resolveRef(parseRef("cmd:pw"), { commands: { pw: ["/bin/sh", "-c", "echo the-leaked-value; exit 3"] } });
    } catch (e) {
      expect((e as Error).message).not.toContain("the-leaked-value");
    }
    expect(resolveRef(parseRef("cmd:pw"), { commands: { pw: ["/bin/echo", "from-a-manager"] } })).toBe("from-a-manager");
    expect(() => parseRef("github")).toThrow(/secret:NAME, env:NAME or cmd:NAME/);
  });

  it("vak secret set reads the value from stdin without echoing it; list shows names, never values", async () => {
    const env = { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: dir, XDG_CONFIG_HOME: join(dir, "config"), XDG_STATE_HOME: TEST_STATE, LANG: "C.UTF-8" };
    const set = await runVak(["secret", "set", "deploy"], { cwd: dir, env, input: "s3cr3t-deploy-value\n" });
    expect(set.code).toBe(0);
    expect(set.stdout + set.stderr).not.toContain("s3cr3t-deploy-value");
    const list = await runVak(["secret", "list"], { cwd: dir, env });
    expect(list.code).toBe(0);
    expect(list.stdout).toContain("secret:deploy");
    expect(list.stdout).not.toContain("s3cr3t-deploy-value");
    expect(JSON.parse(readFileSync(join(dir, "config", "vak", "secrets.json"), "utf8")).secrets.deploy.value).toBe("s3cr3t-deploy-value");
    chmodSync(join(dir, "config", "vak", "secrets.json"), 0o644);
    const refused = await runVak(["secret", "list"], { cwd: dir, env });
    expect(refused.code).toBe(125);
    expect(refused.stderr).toMatch(/readable by others/);
  });
});

describe("redaction", () => {
  const value = "tok-9f8e7d6c5b4a39281706";
  const r = new Redactor();
  r.add(value);
  it.each([
    ["raw", `value=${value}`],
    ["base64", Buffer.from(value).toString("base64")],
    ["base64 at every alignment", ["", "x", "xy"].map((p) => Buffer.from(`${p}${value}!`).toString("base64")).join(" ")],
    ["base64 wrapped at 76 columns", Buffer.from(`${"A=1\n".repeat(20)}SECRET=${value}\n`).toString("base64").replace(/(.{76})/g, "$1\n")],
    ["hex", Buffer.from(value).toString("hex")],
    ["URL-encoded", encodeURIComponent(`${value}/+`)],
  ])("hides a known value: %s", (_n, text) => {
    const out = r.text(text);
    expect(out).toContain("[REDACTED]");
    expect(out).not.toContain(value);
    expect(Buffer.from(out.replace(/\s/g, ""), "base64").toString("latin1")).not.toContain(value);
  });

  // These took minutes (quadratic backtracking) before; now they are linear. The test's own timeout is the bound.
  it("stays linear on hostile input: one 1 MiB line, thousands of BEGIN markers", { timeout: 20_000 }, () => {
    const long = "A".repeat(1 << 20);
    expect(r.text(long)).toBe(long);
    const begins = "-----BEGIN PRIVATE KEY-----".repeat(40_000);
    expect(r.text(begins)).toBe(begins);
    expect(r.text("k: -----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY----- end")).toBe("k: [REDACTED] end");
  });

  it.each([
    ["OpenAI", "sk-proj-abcdefghijklmnopqrstuvwx0123"],
    ["GitHub", "ghp_abcdefghijklmnopqrstuvwxyz0123456789"],
    ["AWS", "AKIAIOSFODNN7EXAMPLE"],
    ["Bearer", "Authorization: Bearer abc.def.ghijklmnop"],
  ])("hides a credential shape it was never told about: %s", (_n, text) => {
    expect(new Redactor().text(`x ${text} y`)).toContain("[REDACTED]");
  });
});

describe("secrets injected into one component", () => {
  let s: Scratch;
  let journal: Journal;
  const value = `inj-${Math.random().toString(36).slice(2)}-${Math.random().toString(36).slice(2)}`;
  beforeEach(async () => {
    s = scratch();
    journal = await openJournal({ path: join(dir, "journal.db"), ingest: false });
  });
  afterEach(async () => {
    await journal.close();
    s.cleanup();
  });

  it("reach that component's commands only; never another's environment or /proc, the journal, or the model", async () => {
    const inject: InjectedSecret[] = [{ ref: "secret:deploy", value, recipient: { kind: "env", name: "DEPLOY_TOKEN" } }];
    // Component A holds the secret and keeps a command running with it.
    const a = new AgentSession({
      workspace: s.ws, mode: "workspace-write", journal, inject, poolSize: 0, approvalRules: { write: "allow", exec: "allow" },
      model: new ScriptedClient({ turns: [{ tool_calls: [{ name: "exec", args: { command: 'echo "$DEPLOY_TOKEN" > a-saw.txt; echo raw:$DEPLOY_TOKEN; printf %s "$DEPLOY_TOKEN" | base64; env | base64; touch a-started; sleep 3' } }] }, { text: "ok" }] }),
    });
    const b = new AgentSession({
      workspace: s.ws, mode: "workspace-write", journal, poolSize: 0, approvalRules: { write: "allow", exec: "allow" },
      model: new ScriptedClient({
        turns: [{ tool_calls: [{ name: "exec", args: { command: "while [ ! -e a-started ]; do sleep 0.05; done; (env; cat /proc/*/environ; ps -eo args) > b-saw.txt 2>&1; echo checked" } }] }, { text: "ok" }],
      }),
    });
    try {
      const [ra, rb] = await Promise.all([a.run("use the token"), b.run("look around")]);
      expect(ra.outcome).toBe("done");
      expect(rb.outcome).toBe("done");
      // A's command got the value (read on the host side, unredacted).
      expect(readFileSync(join(s.ws, "a-saw.txt"), "utf8").trim()).toBe(value);
      // B's sandbox, running at the same time, saw nothing of it.
      const bSaw = readFileSync(join(s.ws, "b-saw.txt"), "utf8");
      expect(bSaw).toContain("PATH=");
      expect(bSaw).not.toContain(value);
      expect(bSaw).not.toContain("DEPLOY_TOKEN");
      // What A's model was sent: the output, with the value hidden raw and base64-encoded.
      const seen = JSON.stringify((a as unknown as { opts: { model: ScriptedClient } }).opts.model.seen);
      expect(seen).toContain("raw:[REDACTED]");
      expect(seen).not.toContain(value);
      expect(seen).not.toContain(Buffer.from(value).toString("base64"));
      // The journal names the secret and its recipient, never the value.
      await journal.flush();
      const used = (await journal.events(a.journalSession!.id)).filter((e) => e.kind === "secret.used");
      expect(used[0]!.payload).toMatchObject({ name: "secret:deploy", recipient: "env DEPLOY_TOKEN", component: "agent" });
      expect((await journal.events(b.journalSession!.id)).filter((e) => e.kind === "secret.used")).toEqual([]);
      for (const f of ["journal.db", "journal.db-wal"]) {
        try {
          expect(readFileSync(join(dir, f)).includes(value)).toBe(false);
        } catch (e) {
          if ((e as NodeJS.ErrnoException).code !== "ENOENT") throw e;
        }
      }
    } finally {
      await a.close();
      await b.close();
    }
  });
});

describe("a header secret", () => {
  let s: Scratch;
  let journal: Journal;
  const seen: { server: string; key: string | undefined }[] = [];
  const servers: Server[] = [];
  let ports: number[] = [];
  beforeEach(async () => {
    s = scratch();
    journal = await openJournal({ path: join(dir, "journal.db"), ingest: false });
    seen.length = 0;
    ports = [];
    for (const name of ["declared", "other"]) {
      const srv = createServer((req, res) => {
        seen.push({ server: name, key: req.headers["x-api-key"] as string | undefined });
        res.end("ok\n");
      });
      await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
      servers.push(srv);
      ports.push((srv.address() as { port: number }).port);
    }
  });
  afterEach(async () => {
    for (const srv of servers.splice(0)) await new Promise((r) => srv.close(r));
    await journal.close();
    s.cleanup();
  });

  it("reaches only the declared host; another host gets the placeholder; the command never sees the value", async () => {
    const value = `hdr-${Math.random().toString(36).slice(2)}${Math.random().toString(36).slice(2)}`;
    const [declared, other] = ports;
    const session = journal.startSession({ kind: "test", title: "header secret" });
    const broker = new Broker({
      workspace: s.ws, mode: "workspace-write", journal: session,
      net: parseNetGrants([`127.0.0.1:${declared}`, `127.0.0.1:${other}`]),
      secrets: [{ ref: "secret:api", value, recipient: { kind: "header", header: "X-Api-Key", hosts: [`127.0.0.1:${declared}`], placeholderEnv: "API_KEY" } }],
    });
    try {
      const fetchBoth = `for (const p of [${declared}, ${other}]) await fetch("http://127.0.0.1:" + p + "/", { headers: { "x-api-key": process.env.API_KEY } }).then((r) => r.text());`;
      const r = await broker.run({ kind: "exec", command: `printf %s "$API_KEY" > seen.txt; node --input-type=module -e '${fetchBoth}' && echo fetched` });
      expect(r.ok && r.output).toContain("fetched");
      const placeholder = readFileSync(join(s.ws, "seen.txt"), "utf8");
      expect(placeholder).toMatch(/^vak-placeholder-/);
      expect(placeholder).not.toContain(value);
      expect(seen).toEqual([{ server: "declared", key: value }, { server: "other", key: placeholder }]);
      await journal.flush();
      const used = (await journal.events(session.id)).filter((e) => e.kind === "secret.used");
      expect(used).toHaveLength(1);
      expect(used[0]!.payload).toMatchObject({ name: "secret:api", recipient: expect.stringContaining(`127.0.0.1:${declared}`) });
      expect(JSON.stringify(await journal.events(session.id))).not.toContain(value);
    } finally {
      await broker.close();
    }
  });
});

describe("vak exec --secret", () => {
  it("puts the value in the command's environment, records the reference, and fails closed on a missing one", async () => {
    const s = scratch();
    try {
      const value = `exec-secret-${Math.random().toString(36).slice(2)}`;
      const env = { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: dir, XDG_CONFIG_HOME: join(dir, "config"), XDG_STATE_HOME: TEST_STATE, LANG: "C.UTF-8", VAK_TEST_TOKEN_SRC: value };
      const ok = await runVak(["exec", "--secret", "TOKEN=env:VAK_TEST_TOKEN_SRC", "--", "/bin/sh", "-c", 'printf %s "$TOKEN" > got.txt; printf %s "${VAK_TEST_TOKEN_SRC:-absent}" > src.txt'], { cwd: s.ws, env });
      expect(ok.code).toBe(0);
      expect(readFileSync(join(s.ws, "got.txt"), "utf8")).toBe(value);
      expect(readFileSync(join(s.ws, "src.txt"), "utf8")).toBe("absent");
      const search = await runVak(["journal", "search", "env:VAK_TEST_TOKEN_SRC", "--json"], { cwd: s.ws, env });
      expect(search.stdout).toContain("secret.used");
      expect(search.stdout).not.toContain(value);
      const missing = await runVak(["exec", "--secret", "TOKEN=secret:nope", "--", "/bin/true"], { cwd: s.ws, env });
      expect(missing.code).toBe(125);
      expect(missing.stderr).toMatch(/secret:nope: no such secret/);
      const reserved = await runVak(["exec", "--secret", "PATH=env:VAK_TEST_TOKEN_SRC", "--", "/bin/true"], { cwd: s.ws, env });
      expect(reserved.code).toBe(125);
      expect(reserved.stderr).toMatch(/PATH: Vak sets this variable itself/);
    } finally {
      s.cleanup();
    }
  });
});

describe("vak exec --secret: a value the command puts where Vak reports", () => {
  it("a refused path, a name looked up, an --explain line and the JSON summary show it redacted, and so does the journal", async () => {
    const s = scratch();
    try {
      const value = `Zq${Math.random().toString(36).slice(2, 12)}Xy`;
      mkdirSync(join(s.outside, value), { recursive: true });
      writeFileSync(join(s.outside, value, "file"), "x\n");
      mkdirSync(join(s.ws, "hidden"));
      const env = { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: dir, XDG_CONFIG_HOME: join(dir, "config"), XDG_STATE_HOME: TEST_STATE, LANG: "C.UTF-8", VAK_TEST_TOKEN_SRC: value };
      const script = [
        `mkdir /usr/$TOKEN`, // refused by the guard, while it runs
        `getent hosts $TOKEN.example.com`, // a name the resolver refuses (reported lowercased)
        `cat ${s.outside}/$TOKEN/file`, // outside the view: --explain's "not in the view"
        `mkdir hidden/$TOKEN`, // inside a --deny-read directory
        "true",
      ].join(" 2>/dev/null; ");
      const r = await runVak(["exec", "--json", "--explain", "--deny-read", "hidden", "--secret", "TOKEN=env:VAK_TEST_TOKEN_SRC", "--", "/bin/sh", "-c", script], { cwd: s.ws, env });
      expect(r.code).toBe(0);
      for (const form of [value, value.toLowerCase()]) expect(r.stderr).not.toContain(form);
      expect(r.stderr).toMatch(/^vak: refused mkdir \/usr\/\[REDACTED\]: /m);
      expect(r.stderr).toMatch(/^vak: a lookup of \[REDACTED\]\.example\.com was answered/m);
      expect(r.stderr).toMatch(/^vak: {3}not in the view: .*\/outside\/\[REDACTED\]/m);
      expect(r.stderr).toMatch(/^vak: refused mkdir .*\/hidden\/\[REDACTED\]: protected path .*\/hidden \(deny_read, from --deny-read\)$/m);
      expect(JSON.stringify(r.summary)).toContain("/usr/[REDACTED]");
      const shown = await runVak(["journal", "show", "last", "--json"], { cwd: s.ws, env });
      expect(shown.code).toBe(0);
      expect(shown.stdout).toContain("/usr/[REDACTED]");
      for (const form of [value, value.toLowerCase()]) expect(shown.stdout).not.toContain(form);
    } finally {
      s.cleanup();
    }
  });
});

describe("vak exec --allow-env and provider keys", () => {
  it("a [providers] table it cannot read without the schema is checked whole, never skipped: the run is refused, naming the key", async () => {
    const s = scratch();
    try {
      const config = join(dir, "config");
      mkdirSync(join(config, "vak"), { recursive: true });
      writeFileSync(join(config, "vak", "config.toml"), `[providers.local]\nkind = "openai"\nbase_url = "http://127.0.0.1:9/v1"\napi_key_env = ["LOCAL_LLM_KEY"]\n`);
      const env = { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: dir, XDG_CONFIG_HOME: config, XDG_STATE_HOME: TEST_STATE, LANG: "C.UTF-8", LOCAL_LLM_KEY: "sk-local-0123456789abcdef" };
      const r = await runVak(["exec", "--allow-env", "LOCAL_LLM_KEY", "--", "/bin/sh", "-c", "printf %s \"$LOCAL_LLM_KEY\" > got.txt"], { cwd: s.ws, env });
      expect(r.code).toBe(125);
      expect(r.stderr).toMatch(/api_key_env/);
      expect(existsSync(join(s.ws, "got.txt"))).toBe(false);
    } finally {
      s.cleanup();
    }
  });

  it("refuses to pass a provider key as a plain variable (by its name, a configured provider's, or a copy), and says how to pass it on the record", async () => {
    const s = scratch();
    try {
      const key = `sk-proj-${Math.random().toString(36).slice(2)}${"P".repeat(24)}`;
      const config = join(dir, "config");
      mkdirSync(join(config, "vak"), { recursive: true });
      writeFileSync(join(config, "vak", "config.toml"), `[providers.local]\nkind = "openai"\nbase_url = "http://127.0.0.1:9/v1"\napi_key_env = "LOCAL_LLM_KEY"\n`);
      const env = { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: dir, XDG_CONFIG_HOME: config, XDG_STATE_HOME: TEST_STATE, LANG: "C.UTF-8", OPENAI_API_KEY: key, LOCAL_LLM_KEY: key, COPY: `Bearer ${key}`, HARMLESS: "ok" };
      const leak = 'printf %s "$OPENAI_API_KEY$LOCAL_LLM_KEY$COPY" > leaked.txt';
      for (const [name, message] of [
        ["OPENAI_API_KEY", /--allow-env OPENAI_API_KEY is refused, since OPENAI_API_KEY is the environment variable of a model provider's key; .*--secret OPENAI_API_KEY=env:OPENAI_API_KEY$/m],
        ["LOCAL_LLM_KEY", /--allow-env LOCAL_LLM_KEY is refused, since LOCAL_LLM_KEY is the environment variable of a model provider's key/],
        ["COPY", /--allow-env COPY is refused, since COPY holds the value of a model provider's key/],
        ["ANTHROPIC_API_KEY", /ANTHROPIC_API_KEY is the environment variable/],
      ] as const) {
        const r = await runVak(["exec", "--allow-env", `HARMLESS,${name}`, "--", "/bin/sh", "-c", leak], { cwd: s.ws, env });
        expect(r.code, name).toBe(125);
        expect(r.stderr).toMatch(message);
        expect(r.stderr).not.toContain(key);
        expect(existsSync(join(s.ws, "leaked.txt"))).toBe(false);
      }
      // Declared as a secret it goes through, recorded by reference (an agent CLI run under vak exec needs its key).
      const ok = await runVak(["exec", "--allow-env", "HARMLESS", "--secret", "OPENAI_API_KEY=env:OPENAI_API_KEY", "--", "/bin/sh", "-c", 'printf %s "$OPENAI_API_KEY" > got.txt'], { cwd: s.ws, env });
      expect(ok.code).toBe(0);
      expect(readFileSync(join(s.ws, "got.txt"), "utf8")).toBe(key);
    } finally {
      s.cleanup();
    }
  });
});
