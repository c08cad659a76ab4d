import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { installHeld } from "../policy/install-held.js";
import { isWithin } from "../policy/paths.js";
import { decide } from "../policy/plan.js";
import { protectedMatch } from "../policy/protected.js";
import { hostFacts } from "./host.js";
import { launch } from "./launcher.js";

/* What `vak doctor` and `vak audit` both try: a real sandboxed command, and
 * whether Vak's own installation is held read-only from this workspace. */

/**
 * Is Vak's own installation out of every sandbox's reach? It is held
 * read-only wherever a writable grant reaches it; this checks that the plan
 * for the current directory as a workspace (what `vak exec` uses by default)
 * holds every part of it that lies there.
 */
export function installCheck(): { ok: boolean; line: string; root: string; held: number } {
  const host = hostFacts();
  const install = host.install!;
  const all = installHeld(install, [install.packageRoot, "/"]);
  const cwd = process.cwd();
  const inside = all.filter((h) => isWithin(h.path, cwd));
  if (inside.length === 0)
    return { ok: true, root: install.packageRoot, held: all.length, line: `${install.packageRoot} is outside this workspace; any grant that reaches it holds it read-only (${all.length} paths: the package, the modules it loads, its launchers, Node)` };
  let held: Set<string>;
  try {
    const plan = decide({ mode: "workspace-write", sandbox: "namespaces", workspace: cwd, grants: { read: [], write: [], denyRead: [], denyWrite: [], noLinks: [], env: [] }, limits: {}, command: ["/bin/true"] }, host);
    held = new Set(plan.protect.filter((r) => r.kind === "abs" || r.kind === "noread").map((r) => r.pattern));
  } catch (e) {
    return { ok: false, root: install.packageRoot, held: 0, line: `cannot plan a sandbox for this directory: ${e instanceof Error ? e.message : String(e)}` };
  }
  const depth = cwd.split("/").filter(Boolean).length;
  const missing = inside.filter((h) => ![...held].some((p) => isWithin(h.path, p)) && !protectedMatch(h.path, { rootDepth: depth }));
  if (missing.length > 0) return { ok: false, root: install.packageRoot, held: inside.length - missing.length, line: `NOT held: ${missing.slice(0, 3).map((m) => m.path).join(", ")}` };
  return { ok: true, root: install.packageRoot, held: inside.length, line: `${install.packageRoot} lies in this workspace and is held read-only (${inside.length} paths: the package, the modules it loads, its launchers)` };
}

/** Tries a real sandboxed command end to end; returns the failure, if any. */
export async function smokeTest(sandbox: "namespaces" | "reduced"): Promise<string | undefined> {
  let ws: string;
  try {
    ws = mkdtempSync(join(tmpdir(), "vak-doctor-"));
  } catch (e) {
    // No temporary workspace, no sandboxed command: a failure to report, not a crash.
    return `cannot make a temporary workspace in ${tmpdir()} (TMPDIR): ${e instanceof Error ? e.message : String(e)}`;
  }
  const scratch = { tmp: join(ws, ".scratch"), home: join(ws, ".scratch", "home") };
  try {
    if (sandbox === "reduced") mkdirSync(scratch.home, { recursive: true });
    const plan = decide(
      { mode: "workspace-write", sandbox, workspace: ws, grants: { read: [], write: [], denyRead: [], denyWrite: [], noLinks: [], env: [] }, limits: { timeoutMs: 10_000 }, command: ["/bin/sh", "-c", "echo ok > probe && cat probe"], scratch },
      hostFacts(),
    );
    const sb = launch(plan, ["ignore", "pipe", "pipe"]);
    let out = "";
    let errText = "";
    sb.stdout?.on("data", (d: Buffer) => (out += d.toString()));
    sb.stderr?.on("data", (d: Buffer) => (errText += d.toString()));
    const r = await sb.result;
    if (r.setupError) return `${r.setupError.step}: ${r.setupError.message}`;
    if (r.code !== 0 || out.trim() !== "ok") return `exit ${r.code}: ${errText.trim() || out.trim()}`;
    return undefined;
  } catch (e) {
    return e instanceof Error ? e.message : String(e);
  } finally {
    rmSync(ws, { recursive: true, force: true });
  }
}
