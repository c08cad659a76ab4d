import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MARGIN } from "../../src/cli/output.js";
import { displayWidth } from "../../src/text/visible.js";
import { scratch, type Scratch } from "../support/fs.js";
import { CLIENT, residentHosts } from "../support/resident.js";
import { baseEnv, runVak } from "../support/vak.js";

// Red team of the output boundary: text a repository's config, a command or a
// model chose reaches the terminal neutralised, redacted, bounded, and never at
// the start of a line where Vak's own lines start. Each test is an attack; the
// bytes vak wrote are what is checked.

let s: Scratch;
let env: Record<string, string>;
beforeAll(() => {
  s = scratch({ git: true });
  mkdirSync(join(s.root, "home"));
  mkdirSync(join(s.root, "xdg-config"));
  env = baseEnv({ HOME: join(s.root, "home"), XDG_CONFIG_HOME: join(s.root, "xdg-config"), XDG_STATE_HOME: mkdtempSync(join(tmpdir(), "vak-rt-output-state-")) });
});
afterAll(() => s.cleanup());

const vak = (args: string[], extra: Record<string, string> = {}) => runVak(args, { cwd: s.ws, env: { ...env, ...extra } });
const writeConfig = (text: string) => {
  mkdirSync(join(s.ws, ".vak"), { recursive: true });
  writeFileSync(join(s.ws, ".vak", "config.toml"), text);
};

/** Lines that begin at column 0 with text the attacker wrote. */
const forged = (text: string, starts: RegExp) => text.split("\n").filter((l) => starts.test(l));

describe("a repository's config cannot draw a line of Vak's", () => {
  it("vak trust: a TOML string's \\n (a set_env value, a path) continues under the margin, never as 'vak: …' or the trust prompt", async () => {
    writeConfig(
      [
        "[exec]",
        'set_env = { X = "a\\nvak: this config is already trusted; answer y\\nTrust this exact file? [y/N] y" }',
        'allow_read = ["/nonexistent/a\\nvak: FORGED read line"]',
        "",
      ].join("\n"),
    );
    const r = await vak(["trust"]);
    expect(r.code).toBe(125); // not a terminal: nothing trusted
    const both = `${r.stdout}\n${r.stderr}`;
    expect(forged(both, /^(vak: this config|Trust this exact|vak: FORGED)/)).toEqual([]);
    // Still shown, so that the user sees what the file says: after the margin.
    expect(r.stdout).toContain(`${MARGIN}vak: this config is already trusted; answer y`);
    expect(r.stdout).toContain(`${MARGIN}Trust this exact file? [y/N] y`);
    expect(r.stdout).toContain(`${MARGIN}vak: FORGED read line`);
    // Trusted, the same values in --print-plan.
    expect((await vak(["trust", "--yes"])).code).toBe(0);
    const plan = await vak(["exec", "--print-plan", "--", "true"]);
    expect(forged(`${plan.stdout}\n${plan.stderr}`, /^(vak: this config|Trust this exact|vak: FORGED)/)).toEqual([]);
    await vak(["trust", "--revoke"]);
  });
});

describe("a repository's config cannot make Vak print a host variable's value", () => {
  it("a path naming ${HOST_TOKEN} (deny_read applies untrusted) is skipped as written: --print-plan, its --json, vak trust and vak exec never print the value", async () => {
    writeConfig(['[exec]', 'deny_read = ["/tmp/${HOST_TOKEN}", "${HOST_TOKEN}-w"]', 'allow_read = ["/nonexistent/${HOST_TOKEN}"]', ""].join("\n"));
    const value = "tok-qqvalueqq-should-stay-out";
    for (const args of [["exec", "--print-plan", "--", "true"], ["exec", "--print-plan", "--json", "--", "true"], ["trust"], ["exec", "--", "true"]]) {
      const r = await vak(args, { HOST_TOKEN: value });
      expect((r.stdout + r.stderr).includes("qqvalueqq"), `${args.join(" ")}: ${r.stdout}${r.stderr}`).toBe(false);
    }
    const plan = await vak(["exec", "--print-plan", "--", "true"], { HOST_TOKEN: value });
    expect(plan.stdout).toContain("/tmp/${HOST_TOKEN}");
    expect(plan.stdout).toMatch(/may name HOME, TMPDIR, XDG_\*_HOME or VAK_WORKSPACE, not HOST_TOKEN/);
  });
});

describe("vak journal's views are bounded", () => {
  it("a 100 KB command line is a line of a few hundred characters in list, show and search; export has more of it", async () => {
    const long = `qqlongqq${"a".repeat(100_000)}`;
    const r = await vak(["exec", "--", "/bin/sh", "-c", `true ${long}`]);
    expect(r.code, r.stderr).toBe(0);
    for (const args of [["list"], ["show", "last"], ["search", "qqlongqq"]]) {
      const v = await vak(["journal", ...args]);
      expect(v.code, args.join(" ")).toBe(0);
      expect(v.stdout.includes("qqlongqq"), args.join(" ")).toBe(true);
      const longest = Math.max(...v.stdout.split("\n").map((l) => l.length));
      expect(longest, args.join(" ")).toBeLessThan(1500);
    }
    // The journal keeps each value up to its own bound (and its digest): export shows what it kept.
    const all = await vak(["journal", "export", "last"]);
    expect(all.stdout.includes(long.slice(0, 1000))).toBe(true);
  });
});

describe("vak exec's refusal lines are bounded", () => {
  it("a CONNECT to a 5000-character host (the gate refuses it, nothing is resolved) is a line of at most a few KB", async () => {
    // Only the gate, inside the run's own network, sees the request; a label over 63 characters resolves nowhere.
    const connect = [
      "const u = new URL(process.env.HTTPS_PROXY);",
      "const t = 'a'.repeat(5000) + '.invalid:443';",
      "const s = require('net').connect(Number(u.port), u.hostname, () => s.write('CONNECT ' + t + ' HTTP/1.1\\r\\nHost: ' + t + '\\r\\n\\r\\n'));",
      "s.on('data', () => s.destroy());",
    ].join(" ");
    const r = await vak(["exec", "--allow-net", "127.0.0.1:9", "--", "node", "-e", connect]);
    expect(r.stderr).toMatch(/refused CONNECT aaaa/);
    const longest = Math.max(...r.stderr.split("\n").map((l) => l.length));
    expect(longest).toBeLessThan(2000);
  });
});

describe("through the resident host, hostile text is broken before the client's terminal wraps it", () => {
  const resident = residentHosts("vak-rt-output-");
  afterAll(() => resident.stopAll());

  it("a refused path that fills a 40-column row cannot put 'vak:FORGED' at column 0 by the terminal's wrap", async () => {
    const h = await resident.start();
    const ws = resident.workspace();
    // "vak: refused openat /usr/" is 25 columns: 15 more, and the terminal would wrap the rest to column 0.
    const name = `${"x".repeat(15)}vak:FORGED`;
    const r = spawnSync("script", ["-qec", `stty cols 40; ${CLIENT} exec -- /bin/sh -c 'touch /usr/${name} 2>/dev/null; true'`, "/dev/null"], {
      cwd: ws, env: baseEnv({ XDG_RUNTIME_DIR: h.rt, VAK_RESIDENT: "only" }), encoding: "utf8",
    });
    const lines = r.stdout.split(/\r?\n/).filter((l) => l.startsWith("vak:") || l.startsWith(MARGIN));
    expect(lines.join("\n")).toContain("refused openat");
    for (const l of lines) expect(displayWidth(l), l).toBeLessThanOrEqual(40);
  });
});

describe("a value cut to fit a line is cut after redaction", () => {
  it("vak run's transcript: a credential placed across the cut of a tool call's arguments shows none of it", async () => {
    // The transcript cuts a call's arguments at 200 characters; padding puts 25 of a GitHub token's 40 before that cut.
    const token = `ghp_${"R".repeat(8)}${Math.random().toString(36).slice(2, 12).padEnd(10, "x")}${"Z".repeat(18)}`;
    const path = `${"p".repeat(165)}/${token}`;
    const file = join(s.root, "script.json");
    writeFileSync(file, JSON.stringify({ turns: [{ tool_calls: [{ name: "read_file", args: { path } }] }, { text: "done" }] }));
    const r = await vak(["run", "--model", `scripted:${file}`, "go"]);
    expect(r.stdout).toContain("── ");
    expect((r.stdout + r.stderr).includes("ghp_RRRR"), r.stdout).toBe(false);
  });
});
