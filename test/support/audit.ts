import { chmodSync, mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import Database from "better-sqlite3";
import { expect } from "vitest";
import { AuditReportSchema, type AuditReport, type Finding } from "../../src/audit/finding.js";
import { runVak, type RunResult } from "./vak.js";

/**
 * A temporary home for `vak audit`: HOME and every XDG directory point into
 * it, so the child process audits only what the test built there.
 */
export interface AuditHome {
  root: string;
  workspace: string;
  config: string;
  state: string;
  env: Record<string, string>;
  /** Writes a file, 0600 under 0700 directories unless a mode is given. */
  write(path: string, text: string, mode?: number): string;
  audit(args?: string[], opts?: { wrapper?: string[]; env?: Record<string, string> }): Promise<AuditRun>;
  /** The audit.fixed events in this home's journal. */
  fixedEvents(): { check: string; path: string; from: string; to: string }[];
  cleanup(): void;
}

export interface AuditRun extends RunResult {
  report: AuditReport;
  ids: string[];
  find(id: string): Finding | undefined;
}

export function auditHome(): AuditHome {
  const root = realpathSync(mkdtempSync(join(tmpdir(), "vak-audit-")));
  const workspace = join(root, "ws");
  const config = join(root, ".config");
  const state = join(root, ".local", "state");
  for (const d of [workspace, join(config, "vak"), join(state, "vak"), join(root, ".local", "share"), join(root, ".cache")]) mkdirSync(d, { recursive: true, mode: 0o700 });
  for (const d of [config, join(root, ".local"), state]) chmodSync(d, 0o700);
  const env = {
    PATH: process.env.PATH ?? "/usr/bin:/bin",
    LANG: "C.UTF-8",
    HOME: root,
    XDG_CONFIG_HOME: config,
    XDG_STATE_HOME: state,
    XDG_DATA_HOME: join(root, ".local", "share"),
    XDG_CACHE_HOME: join(root, ".cache"),
  };
  const h: AuditHome = {
    root, workspace, config, state, env,
    write(path, text, mode = 0o600) {
      mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
      writeFileSync(path, text, { mode });
      chmodSync(path, mode);
      return path;
    },
    async audit(args = [], opts = {}) {
      const r = await runVak(["audit", "--json", ...args], { cwd: workspace, env: { ...env, ...opts.env }, wrapper: opts.wrapper });
      const line = r.stdout.trim().split("\n").pop() ?? "";
      const report = AuditReportSchema.parse(JSON.parse(line));
      // The exit code is the report's verdict, always.
      expect(r.code, r.stderr).toBe(report.ok && !r.stderr.includes("vak audit:") ? 0 : 1);
      expect(report.ok).toBe(!report.findings.some((f) => f.severity !== "info"));
      return { ...r, report, ids: report.findings.map((f) => f.id), find: (id) => report.findings.find((f) => f.id === id) };
    },
    fixedEvents() {
      const db = new Database(join(state, "vak", "journal.db"), { readonly: true });
      try {
        return (db.prepare("SELECT payload FROM events WHERE kind = 'audit.fixed' ORDER BY seq").all() as { payload: string }[]).map((r) => JSON.parse(r.payload));
      } finally {
        db.close();
      }
    },
    cleanup() {
      rmSync(root, { recursive: true, force: true });
    },
  };
  return h;
}
