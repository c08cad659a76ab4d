import type { AgentEvent, RunResult } from "../agent/agent.js";
import type { ApprovalRequest } from "../approvals/approval-gate.js";
import { viewLines } from "../approvals/approval-view.js";
import { openJournal } from "../journal/open.js";
import { visible } from "../text/visible.js";
import { providerKeys } from "../model/provider-keys.js";
import { resolveModel } from "../model/providers.js";
import type { ModelClient } from "../model/types.js";
import { loadUserConfig } from "../policy/config.js";
import type { SandboxKind } from "../policy/plan.js";
import type { SecretStore } from "../secrets/store.js";
import { checkSpec, loadSpec, type WorkloadPlan, type WorkloadSpecInput } from "./spec.js";
import { WorkloadSession } from "./workload-session.js";

/** What an embedding application sees of a session as it runs. */
export type HostEvent =
  | AgentEvent
  | { type: "approval"; component: string; summary: string; op: string; target?: string | undefined; answer: "allow" | "deny" }
  | { type: "denial"; component: string; name: string; code: string; text: string };

/**
 * An approval as the library hands it to the application: every string in it
 * is redacted and neutralised (safe to print on a terminal as it is), and
 * detail is the whole op, never clipped: the command, the input, or a diff of
 * the file, rendered exactly (src/text/exact.ts).
 */
export interface HostApprovalRequest {
  component: string;
  /** One line: what the op does (long commands and inputs are cut there, saying how much: detail has all of it). */
  summary: string;
  op: string;
  target?: string | undefined;
  /** What the answer covers: always this op alone (the library answers once; it has no "for this session"). */
  scope: string;
  /** The whole op, one line per line. */
  detail: string;
}

export interface HostOptions {
  /** A model client, or "provider:model" resolved from the user's config and environment. */
  model?: ModelClient | string;
  /** The user's mode: no component may exceed it (default workspace-write). */
  mode?: "read-only" | "workspace-write";
  /**
   * Decides each approval a component's policy asks for. It can say yes or no;
   * it can never widen a grant (ops outside a grant are refused before anyone
   * is asked). Without it, every op that asks is denied.
   */
  onApproval?: (request: HostApprovalRequest) => boolean | Promise<boolean>;
  onEvent?: (e: HostEvent) => void;
  /** The journal file (default: Vak's own, in the user's state directory). */
  journalPath?: string;
  sandbox?: SandboxKind;
  storesDir?: string;
  secretStore?: SecretStore;
  env?: NodeJS.ProcessEnv;
}

export interface Host {
  readonly spec: WorkloadPlan;
  /** A new session of this workload. */
  session(): WorkloadSessionHandle;
  close(): Promise<void>;
}

/** A session of the workload (a WorkloadSession: the harness and its components), as the library hands it out. */
export interface WorkloadSessionHandle {
  readonly id: string | undefined;
  /** Sends a message to the harness; resolves when the harness is done with it. */
  send(message: string, opts?: { signal?: AbortSignal }): Promise<RunResult>;
  close(): Promise<void>;
}

/**
 * The library: a host for one workload spec (a TOML file's path, or the same
 * shape as an object). Sessions run the harness against the spec's
 * components, each with exactly its grants; everything is journaled.
 */
export async function createHost(spec: WorkloadSpecInput | string, opts: HostOptions = {}): Promise<Host> {
  const config = loadUserConfig();
  // Every provider key the host holds (not only the one this host calls with): no component may be handed one, and each is redacted.
  const keys = providerKeys(config, opts.env ?? process.env);
  const plan = typeof spec === "string" ? loadSpec(spec, { mode: opts.mode, providerKeys: keys, env: opts.env }) : checkSpec(spec, { mode: opts.mode, providerKeys: keys, env: opts.env });
  const resolved = typeof opts.model === "object" ? { client: opts.model, key: undefined } : resolveModel(opts.model ?? plan.harness.model, config, opts.env);
  const withheld = [...new Set([...(resolved.key ? [resolved.key] : []), ...keys.values])];
  const journal = await openJournal(opts.journalPath ? { path: opts.journalPath } : { config });
  const sessions = new Set<WorkloadSession>();
  return {
    spec: plan,
    session(): WorkloadSessionHandle {
      const ws: WorkloadSession = new WorkloadSession(plan, {
        model: resolved.client,
        journal,
        mode: opts.mode,
        sandbox: opts.sandbox,
        storesDir: opts.storesDir,
        secretStore: opts.secretStore,
        secretCommands: config.secret_commands,
        env: opts.env,
        secrets: withheld,
        onEvent: (e) => {
          // Redacted like everything the host shows; raw otherwise (print them through visible()).
          opts.onEvent?.(ws.redactor.value(e));
          if (e.type === "tool-result" && !e.ok) opts.onEvent?.({ type: "denial", component: e.component, name: e.name, code: e.code ?? "refused", text: e.text });
        },
        onApproval: (r: ApprovalRequest) => {
          const show = (t: string) => visible(ws.redactor.text(t));
          const displayed: HostApprovalRequest = {
            component: show(r.component), summary: show(r.summary), op: r.op, target: r.target === undefined ? undefined : show(r.target),
            scope: "this op, once", detail: show(viewLines(r.view).join("\n")),
          };
          void (async () => {
            let yes = false;
            try {
              yes = (await opts.onApproval?.(displayed)) === true;
            } catch {
              yes = false;
            }
            opts.onEvent?.({ type: "approval", component: displayed.component, summary: displayed.summary, op: r.op, target: displayed.target, answer: yes ? "allow" : "deny" });
            // The answer carries the request's own binding; the gate decides whether it still counts.
            ws.approvals.answer({ nonce: r.nonce, digest: r.digest, generation: r.generation, answer: yes ? "allow" : "deny", by: "library" });
          })();
        },
      });
      sessions.add(ws);
      return {
        id: ws.journalSession?.id,
        send: (message, o = {}) => ws.send(message, o.signal),
        close: async () => {
          sessions.delete(ws);
          await ws.close();
        },
      };
    },
    async close() {
      for (const s of [...sessions]) await s.close();
      sessions.clear();
      await journal.close();
    },
  };
}
