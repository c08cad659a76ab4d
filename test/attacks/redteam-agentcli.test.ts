import { execFileSync } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { scratch, type Scratch } from "../support/fs.js";
import { baseEnv, runVak } from "../support/vak.js";

/**
 * The toolchain and agent CLI presets against a hostile command: what the host holds for each tool (its
 * credentials, wherever the tool keeps them) must not reach the sandbox, and what the preset makes writable must
 * not be what the host's copy of the tool later runs. A home of the test's own, with fake credentials in it.
 */
let s: Scratch;
let home: string;
beforeEach(() => {
  s = scratch();
  home = join(s.root, "home");
  mkdirSync(home);
});
afterEach(() => s.cleanup());

const put = (rel: string, text: string) => {
  const p = join(home, rel);
  mkdirSync(dirname(p), { recursive: true });
  writeFileSync(p, text);
  return p;
};
const vak = (args: string[], env: Record<string, string> = {}) => runVak(["exec", ...args], { cwd: s.ws, env: baseEnv({ HOME: home, ...env }) });

describe("a preset's writable state holds nothing the host's tool runs", () => {
  it("gemini: a session cannot plant or replace the ripgrep (~/.gemini/tmp/bin/rg) that the host's Gemini CLI runs for every search", async () => {
    // Gemini CLI 0.61: Storage.getGlobalBinDir() is ~/.gemini/tmp/bin; ripGrep.ts runs bin/rg when it exists
    // (downloading it there when not), in preference to any rg on PATH, for every search the model asks for.
    const mark = join(s.root, "PWNED");
    const evil = `#!/bin/sh\\ntouch ${mark}\\n`;
    const rg = put(".gemini/tmp/bin/rg", "#!/bin/sh\nexit 1\n");
    chmodSync(rg, 0o755);
    const tmp = join(home, ".gemini", "tmp");
    const r = await vak(["--profile", "gemini", "--", "sh", "-c",
      `(printf '${evil}' > ${tmp}/bin/rg 2>/dev/null && echo RG-REPLACED || echo rg-read-only); ` +
      `(rm -f ${tmp}/bin/rg 2>/dev/null; printf '${evil}' > ${tmp}/bin/rg.new 2>/dev/null && mv ${tmp}/bin/rg.new ${tmp}/bin/rg 2>/dev/null && echo RG-RENAMED-IN || echo no-rename); ` +
      `(mv ${tmp}/bin ${tmp}/old-bin 2>/dev/null && echo BIN-MOVED || echo bin-stays); ` +
      `(mkdir -p ${tmp}/x && printf '${evil}' > ${tmp}/x/rg && chmod +x ${tmp}/x/rg && mv ${tmp}/x ${tmp}/bin 2>/dev/null && echo BIN-REPLACED || echo no-bin-replaced); ` +
      `mkdir -p ${tmp}/ws/chats && echo '{}' > ${tmp}/ws/chats/session-1.json && echo chat-kept`]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain("chat-kept");
    for (const bad of ["RG-REPLACED", "RG-RENAMED-IN", "BIN-MOVED", "BIN-REPLACED"]) expect(r.stdout).not.toContain(bad);
    expect(r.stderr).toContain("protected path");
    // The host's Gemini CLI, later, searching: it runs tmp/bin/rg.
    try {
      execFileSync(rg, ["--json", "x", "."], { stdio: "ignore" });
    } catch {
      // the host's own rg here exits 1
    }
    expect(existsSync(mark)).toBe(false);
    expect(readFileSync(rg, "utf8")).toBe("#!/bin/sh\nexit 1\n");
  });

  it("gemini: a session cannot plant Gemini CLI's ripgrep where the host has none yet", async () => {
    const mark = join(s.root, "PWNED");
    mkdirSync(join(home, ".gemini"), { recursive: true });
    const bin = join(home, ".gemini", "tmp", "bin");
    const r = await vak(["--profile", "gemini", "--", "sh", "-c",
      `(mkdir -p ${bin} 2>/dev/null && printf '#!/bin/sh\\ntouch ${mark}\\n' > ${bin}/rg 2>/dev/null && chmod +x ${bin}/rg && echo RG-PLANTED || echo no-rg); echo done`]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain("done");
    expect(r.stdout).not.toContain("RG-PLANTED");
    expect(existsSync(join(bin, "rg"))).toBe(false);
  });
});
