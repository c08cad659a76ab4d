import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { parse as parseToml } from "smol-toml";
import { describe, expect, it } from "vitest";
import { DEPLOY, keyOf, manifests, MODELS, unknownFields, type Manifest } from "../support/k8s.js";
import { ROOT } from "../support/paths.js";
import { journalTargets } from "../../src/journal/open.js";
import { UserConfigSchema } from "../../src/policy/config.js";

// deploy/kubernetes checked without a cluster (none is reachable here): every document against the
// Kubernetes 1.34 OpenAPI schemas that kubernetes-models ships (types, required fields, enums), every
// field name against its kind's type (an unknown field is an error), and the security properties the
// deployment exists for. Not run: a real API server (its defaulting, admission chain, Pod Security),
// a kubelet with user namespaces, a node's seccomp directory, a CNI that enforces NetworkPolicy, runsc.
const all = manifests();
const of = (kind: string) => all.filter((m) => m.doc.kind === kind);
const one = (kind: string, name?: string): Manifest => {
  const ms = of(kind).filter((m) => name === undefined || m.doc.metadata?.name === name);
  expect(ms.length, `${kind} ${name ?? ""}`).toBe(1);
  return ms[0]!;
};

type Obj = Record<string, unknown>;
const at = (o: unknown, path: string): unknown => path.split(".").reduce<unknown>((v, k) => (v as Obj | undefined)?.[k], o);

describe("the Kubernetes manifests", () => {
  it("every document is a kind the schemas know, and valid against its schema", async () => {
    expect(all.length).toBeGreaterThan(10);
    const errors: string[] = [];
    for (const m of all) {
      if (m.doc.kind === "Kustomization" || m.doc.kind === "VakWorkload") continue;
      const model = MODELS[keyOf(m)];
      expect(model, `${m.file}: ${keyOf(m)}`).toBeDefined();
      const Cls = ((await import(model!.module)) as Record<string, new (d: unknown) => { validate(): void }>)[m.doc.kind];
      expect(Cls, `${m.file}: no model for ${keyOf(m)}`).toBeDefined();
      try {
        new Cls!(m.doc).validate();
      } catch (e) {
        errors.push(`${m.file} ${m.doc.kind}: ${(e as Error).message}`);
      }
    }
    expect(errors).toEqual([]);
  });

  it("no document has a field its kind does not know (a misspelt security field would be ignored)", () => {
    expect(unknownFields(all)).toEqual([]);
    // The check itself: a misspelling is caught at any depth.
    const pod = structuredClone(one("Deployment").doc) as Obj;
    (at(pod, "spec.template.spec") as Obj).hostUser = false;
    const container = structuredClone(one("Deployment").doc) as Obj;
    ((at(container, "spec.template.spec.containers") as Obj[])[0]!.securityContext as Obj).readOnlyRootFileSystem = true;
    const policy = structuredClone(one("NetworkPolicy", "vak-host").doc) as Obj;
    (at(policy, "spec") as Obj).egres = [];
    const found = unknownFields([pod, container, policy].map((doc) => ({ file: "x.yaml", doc: doc as Manifest["doc"] }))).join("\n");
    expect(found).toMatch(/'"?hostUser"?' does not exist/);
    expect(found).toMatch(/'"?readOnlyRootFileSystem"?' does not exist/);
    expect(found).toMatch(/'"?egres"?' does not exist/);
  });

  it("kustomization lists every manifest of the deployment, and nothing that is not there", () => {
    const k = one("Kustomization").doc as unknown as { resources: string[] };
    const files = new Set(all.map((m) => m.file).filter((f) => !f.startsWith("examples/") && f !== "kustomization.yaml"));
    expect(new Set(k.resources)).toEqual(files);
  });

  it("the host pod: user namespace, no service-account token, read-only root, non-root, no capability, no escalation, seccomp", () => {
    const pod = at(one("Deployment", "vak-host").doc, "spec.template.spec") as Obj;
    expect(pod.hostUsers).toBe(false);
    expect(pod.automountServiceAccountToken).toBe(false);
    expect(pod.enableServiceLinks).toBe(false);
    for (const k of ["hostNetwork", "hostPID", "hostIPC", "shareProcessNamespace"]) expect(pod[k], k).toBeUndefined();
    expect(at(pod, "securityContext.runAsNonRoot")).toBe(true);
    expect(at(pod, "securityContext.runAsUser")).toBeGreaterThan(0);
    expect(at(pod, "securityContext.seccompProfile.type")).toBe("RuntimeDefault");
    const containers = [...(pod.initContainers as Obj[]), ...(pod.containers as Obj[])];
    expect(containers.length).toBe(2);
    for (const c of containers) {
      const sc = c.securityContext as Obj;
      expect(sc.readOnlyRootFilesystem, `${c.name}`).toBe(true);
      expect(sc.allowPrivilegeEscalation, `${c.name}`).toBe(false);
      expect(sc.runAsNonRoot, `${c.name}`).toBe(true);
      expect(sc.privileged, `${c.name}`).toBeUndefined();
      expect(at(sc, "capabilities.drop")).toEqual(["ALL"]);
      expect(at(sc, "capabilities.add")).toBeUndefined();
      // What the launcher needs inside, and nothing more (deployment.yaml says why for each).
      expect(sc.procMount).toBe("Unmasked");
      expect(sc.seccompProfile).toEqual({ type: "Localhost", localhostProfile: "vak/launcher.json" });
    }
    // The init container refuses to let a pod start where the full sandbox does not work.
    expect((pod.initContainers as Obj[])[0]!.command).toEqual(["vak", "doctor"]);
    // Writable places are the pod's own, bounded; nothing of the node's.
    for (const v of pod.volumes as Obj[]) {
      expect(v.hostPath, `${v.name}`).toBeUndefined();
      if (v.emptyDir) expect(at(v, "emptyDir.sizeLimit"), `${v.name}`).toBeDefined();
    }
    const sa = one("ServiceAccount", pod.serviceAccountName as string).doc as Obj;
    expect(sa.automountServiceAccountToken).toBe(false);
    expect(all.some((m) => /Role/.test(m.doc.kind))).toBe(false);
  });

  it("secrets come from Kubernetes Secrets by reference, never as values in a manifest or the config", () => {
    const pod = at(one("Deployment", "vak-host").doc, "spec.template.spec") as Obj;
    for (const c of [...(pod.initContainers as Obj[]), ...(pod.containers as Obj[])])
      for (const e of (c.env as Obj[] | undefined) ?? []) {
        if (/PASSWORD|KEY|TOKEN|URL|SECRET/.test(e.name as string)) {
          expect(e.value, `${c.name} ${e.name}`).toBeUndefined();
          expect(at(e, "valueFrom.secretKeyRef.name"), `${c.name} ${e.name}`).toBeDefined();
        }
      }
    const config = parseToml((one("ConfigMap", "vak-config").doc.data as Obj)["config.toml"] as string) as Obj;
    // The journal (PostgreSQL, [journal] url) named by reference: its value is the Secret's.
    expect(at(config, "journal.url")).toBe("env:VAK_JOURNAL_URL");
    expect(at(config, "journal.password")).toBe("env:VAK_JOURNAL_PASSWORD");
    const env = (pod.containers as Obj[])[0]!.env as Obj[];
    expect(env.find((e) => e.name === "VAK_JOURNAL_URL")?.valueFrom).toEqual({ secretKeyRef: { name: "vak-journal", key: "url" } });
    // The only Secret in the tree is an example of its shape, not applied by the kustomization.
    for (const s of of("Secret")) expect(s.file.startsWith("examples/")).toBe(true);
  });

  it("the ConfigMap's config.toml is one the host accepts, and names the PostgreSQL journal by the keys it reads", () => {
    const text = (one("ConfigMap", "vak-config").doc.data as Obj)["config.toml"] as string;
    // The same schema loadUserConfig() applies (unknown keys refused), then the journal's own resolution of [journal] url.
    const config = UserConfigSchema.parse(parseToml(text));
    const pod = at(one("Deployment", "vak-host").doc, "spec.template.spec") as Obj;
    const names = (((pod.containers as Obj[])[0]!.env as Obj[]) ?? []).map((e) => e.name as string);
    expect(names).toEqual(expect.arrayContaining(["VAK_JOURNAL_URL", "VAK_JOURNAL_PASSWORD"]));
    const env = { VAK_JOURNAL_URL: "postgres://vak_host@vak-journal.vak.svc:5432/vak?sslmode=verify-full", VAK_JOURNAL_PASSWORD: "pw-from-the-secret" };
    const t = journalTargets(config, { env });
    expect(t?.target.location).toBe("postgres://vak_host@vak-journal.vak.svc/vak");
    expect(t?.target.secrets).toContain("pw-from-the-secret");
    expect(t?.target.config.ssl).toBeTruthy();
    // Without the Secret's variables the host refuses to start rather than fall back to SQLite.
    expect(() => journalTargets(config, { env: {} })).toThrow(/VAK_JOURNAL_URL/);
  });

  it("the NetworkPolicy lets nothing in, and out only to the database, DNS and listed upstream ranges", () => {
    const np = one("NetworkPolicy", "vak-host").doc as Obj;
    const host = at(one("Deployment", "vak-host").doc, "spec.template.metadata.labels") as Obj;
    for (const [k, v] of Object.entries(at(np, "spec.podSelector.matchLabels") as Obj)) expect(host[k]).toBe(v);
    expect(at(np, "spec.policyTypes")).toEqual(["Ingress", "Egress"]);
    expect(at(np, "spec.ingress")).toEqual([]);
    const egress = at(np, "spec.egress") as Obj[];
    expect(egress.length).toBe(3);
    for (const rule of egress) {
      expect((rule.ports as Obj[]).length).toBeGreaterThan(0); // never every port
      for (const to of rule.to as Obj[]) {
        const cidr = at(to, "ipBlock.cidr") as string | undefined;
        if (cidr) {
          expect(cidr).not.toMatch(/^0\.0\.0\.0\/0$|^::\/0$/);
          // Not the cluster's private ranges, link-local or the metadata address.
          expect(cidr).not.toMatch(/^(10\.|127\.|169\.254\.|192\.168\.|172\.(1[6-9]|2\d|3[01])\.)/);
        }
      }
    }
    expect(egress[0]!.ports).toEqual([{ protocol: "TCP", port: 5432 }]);
    const deny = one("NetworkPolicy", "default-deny").doc as Obj;
    expect(at(deny, "spec.podSelector")).toEqual({});
    expect(at(deny, "spec.ingress")).toBeUndefined();
    expect(at(deny, "spec.egress")).toBeUndefined();
  });

  it("the RuntimeClass hook for gVisor names runsc, and the host pod does not use it by default", () => {
    expect(one("RuntimeClass", "gvisor").doc.handler).toBe("runsc");
    expect(at(one("Deployment").doc, "spec.template.spec.runtimeClassName")).toBeUndefined();
  });

  it("the Localhost seccomp profile is the one made from the launcher's table (it cannot drift)", () => {
    const made = execFileSync(process.execPath, [join(ROOT, "scripts/seccomp-profile.mjs")], { encoding: "utf8" });
    expect(readFileSync(join(DEPLOY, "seccomp/vak-launcher.json"), "utf8")).toBe(made);
    const p = JSON.parse(made) as { defaultAction: string; syscalls: { names: string[]; action: string }[] };
    expect(p.defaultAction).toBe("SCMP_ACT_ERRNO");
    const denied = p.syscalls.filter((r) => r.action === "SCMP_ACT_ERRNO").flatMap((r) => r.names);
    for (const n of ["ptrace", "bpf", "perf_event_open", "keyctl", "kexec_load", "init_module", "io_uring_setup", "userfaultfd", "setns"]) expect(denied).toContain(n);
    const allowed = p.syscalls.filter((r) => r.action === "SCMP_ACT_ALLOW").flatMap((r) => r.names);
    for (const n of ["clone", "unshare", "mount", "pivot_root", "open_tree", "move_mount", "mount_setattr", "seccomp", "landlock_restrict_self"]) expect(allowed).toContain(n);
  });
});
