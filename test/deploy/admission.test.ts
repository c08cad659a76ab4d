import { evaluate } from "@marcbachmann/cel-js";
import { Ajv } from "ajv";
import { describe, expect, it } from "vitest";
import { WorkloadSpecSchema } from "../../src/workload/spec.js";
import { manifests, type Manifest } from "../support/k8s.js";

// The admission policy's CEL rules (deploy/kubernetes/validatingadmissionpolicy.yaml), evaluated with a
// CEL library against good and bad workload specs, as the API server would evaluate them (no cluster is
// reachable here, so the API server's own CEL, its type checking against the CRD schema and its cost
// limits were not run). A rule whose evaluation fails denies, as failurePolicy: Fail does.
const all = manifests();
const policy = (name: string) => all.find((m) => m.doc.kind === "ValidatingAdmissionPolicy" && m.doc.metadata?.name === name)!.doc as Manifest["doc"] & {
  spec: { validations: { expression: string; message?: string; messageExpression?: string }[]; matchConditions?: { expression: string }[] };
};
const rules = policy("vak-workload-rules").spec.validations;
const example = structuredClone(all.find((m) => m.doc.kind === "VakWorkload")!.doc) as unknown as { spec: Spec };

type Component = Record<string, unknown> & { name: string };
interface Spec { version: number; name: string; workspace?: string; harness?: object; tools: Component[] }

/** JSON as the API server hands it to CEL: integers are CEL ints, and an absent field is absent. */
const cel = (v: unknown): unknown =>
  typeof v === "number" && Number.isInteger(v) ? BigInt(v)
  : Array.isArray(v) ? v.map(cel)
  : v && typeof v === "object" ? Object.fromEntries(Object.entries(v).filter(([, x]) => x !== undefined).map(([k, x]) => [k, cel(x)]))
  : v;

/** The rules that deny the object, with their messages; an evaluation error denies too. */
function denials(spec: Spec): string[] {
  const ctx = { object: cel({ apiVersion: "vak.dev/v1alpha1", kind: "VakWorkload", metadata: { name: spec.name }, spec }), oldObject: null };
  const out: string[] = [];
  for (const r of rules) {
    let ok: unknown;
    try {
      ok = evaluate(r.expression, ctx);
    } catch (e) {
      out.push(`error: ${(e as Error).message.split("\n")[0]}`);
      continue;
    }
    if (ok === true) continue;
    expect(ok).toBe(false); // a rule yields a bool or fails
    out.push(r.messageExpression ? String(evaluate(r.messageExpression, ctx)) : r.message!);
  }
  return out;
}

const withTool = (patch: Partial<Component>, base = example.spec.tools[1]!): Spec => ({ ...example.spec, tools: [example.spec.tools[0]!, { ...base, ...patch }] });

describe("admission of workload specs (ValidatingAdmissionPolicy, CEL)", () => {
  it("the example spec is admitted, by every rule", () => {
    expect(rules.length).toBe(7);
    expect(denials(example.spec)).toEqual([]);
  });

  it.each([
    ["a subdomain wildcard", "*.github.com"],
    ["every port of a host", "api.github.com:*"],
    ["a read-only wildcard", "read:*.example.com"],
  ])("a wildcard network grant is refused: %s", (_, net) => {
    const d = denials(withTool({ net: [net] }));
    expect(d.some((m) => /wildcard network grants are not admitted \(components: github\)/.test(m))).toBe(true);
  });

  it.each([
    "127.0.0.1", "127.1", "2130706433", "0x7f.1", "0177.0.0.1", "0.0.0.0", "[::1]", "[::ffff:127.0.0.1]", "169.254.169.254",
    "10.0.0.5:5432", "192.168.1.1", "100.64.0.1", "localhost", "localhost:8080", "vak-journal", "read:169.254.169.254", "LOCALHOST",
    "api.github.com.", "1.2.3.4", "[2001:db8::1]:443",
  ])("a destination that is an address or a single-label name is refused: %s", (net) => {
    const d = denials(withTool({ net: [net] }));
    expect(d.some((m) => /network grants must name hosts .*\(components: github\)/.test(m)), d.join("; ")).toBe(true);
  });

  it("host names with ports and the read: form are admitted", () => {
    expect(denials(withTool({ net: ["api.github.com", "uploads.github.com:443", "read:registry.npmjs.org", "a-b.example.co.uk:8443"] }))).toEqual([]);
  });

  it("the header secret's hosts follow the same rule", () => {
    const d = denials(withTool({ secrets: [{ ref: "secret:api", header: "X-Api-Key", hosts: ["169.254.169.254"] }] }));
    expect(d.some((m) => /network grants must name hosts/.test(m))).toBe(true);
  });

  it.each([
    ["the home directory", { read: ["~"] }], ["a dotfile in home", { read: ["~/.ssh"] }], ["an absolute home path", { read: ["/home/vak/.config"] }],
    ["root's home", { write: ["/root"] }], ["climbing out", { read: ["../.."] }], ["climbing out inside a path", { write: ["tools/../../etc"] }],
    ["the host's files", { read: ["/etc"] }],
  ])("a grant outside the workspace is refused: %s", (_, patch) => {
    const d = denials(withTool(patch as Partial<Component>));
    expect(d.some((m) => /read and write grants must be relative paths .*\(components: github\)/.test(m)), d.join("; ")).toBe(true);
  });

  it("the spec cannot choose the workspace", () => {
    expect(denials({ ...example.spec, workspace: "/home/vak" }).some((m) => /workspace must be "\."/.test(m))).toBe(true);
    expect(denials({ ...example.spec, workspace: "." })).toEqual([]);
  });

  it.each(["env:VAK_JOURNAL_PASSWORD", "cmd:github", "github"])("a secret not from Vak's store is refused: %s", (ref) => {
    expect(denials(withTool({ secrets: [{ ref, env: "GITHUB_TOKEN" }] }))).toContain("secrets are admitted only by reference to Vak's store (secret:NAME)");
  });

  it("no host environment variable is passed through", () => {
    expect(denials(withTool({ env: ["VAK_JOURNAL_URL"] })).some((m) => /env grants/.test(m))).toBe(true);
  });

  it("a component that runs model-written commands may not hold secrets", () => {
    const d = denials(withTool({ builtin: ["exec"], command: undefined }));
    expect(d.some((m) => /may not hold secrets \(components: github\)/.test(m))).toBe(true);
  });

  it.each([
    ["a command tool without a limit", { limits: undefined }],
    ["a command tool over an hour", { limits: { timeout_seconds: 7200 } }],
    ["an MCP server without a limit", { command: undefined, mcp: ["node", "server.js"], limits: {} }],
  ])("whatever runs commands needs a time limit: %s", (_, patch) => {
    const d = denials(withTool(patch as Partial<Component>));
    expect(d.some((m) => /limits.timeout_seconds of at most 3600 \(components: github\)/.test(m)), d.join("; ")).toBe(true);
  });

  it("a spec breaking several rules gets each refusal", () => {
    const d = denials(withTool({ net: ["*.x.com"], read: ["~"], env: ["HOME"], limits: undefined }));
    expect(d.map((m) => m.split(" ")[0])).toEqual(["wildcard", "network", "read", "env", "components"]);
  });

  it("only the renderer may write the ConfigMaps a host pod reads its spec from", () => {
    const p = policy("vak-workload-configmaps").spec;
    const cm = (labels: Record<string, string>) => ({ metadata: { name: "vak-workload-triage", labels }, data: { "workload.json": "{}" } });
    const matches = (object: unknown, oldObject: unknown) => p.matchConditions!.every((c) => evaluate(c.expression, { object, oldObject }) === true);
    const allowed = (username: string) => p.validations.every((v) => evaluate(v.expression, { request: { userInfo: { username } } }) === true);
    expect(matches(cm({ "vak.dev/workload": "triage" }), null)).toBe(true);
    expect(matches(cm({ app: "other" }), null)).toBe(false);
    // Removing the label in an update is still governed (the old object had it), and so is a delete.
    expect(matches(cm({}), cm({ "vak.dev/workload": "triage" }))).toBe(true);
    expect(matches(null, cm({ "vak.dev/workload": "triage" }))).toBe(true);
    expect(allowed("system:serviceaccount:vak-system:vak-spec-renderer")).toBe(true);
    expect(allowed("system:serviceaccount:vak:vak-host")).toBe(false);
    expect(allowed("kubernetes-admin")).toBe(false);
  });
});

describe("the VakWorkload resource and Vak's own workload spec", () => {
  const crd = all.find((m) => m.doc.kind === "CustomResourceDefinition")!.doc as unknown as { spec: { versions: { schema: { openAPIV3Schema: Record<string, unknown> } }[] } };
  const schema = crd.spec.versions[0]!.schema.openAPIV3Schema;
  /** The CRD's schema as JSON Schema (its x-kubernetes-* keywords are the API server's, not JSON Schema's). */
  const strip = (v: unknown): unknown =>
    Array.isArray(v) ? v.map(strip) : v && typeof v === "object" ? Object.fromEntries(Object.entries(v).filter(([k]) => !k.startsWith("x-kubernetes-")).map(([k, x]) => [k, strip(x)])) : v;
  const validate = new Ajv({ strict: false, allErrors: true }).compile(strip(schema) as object);

  it("the example is valid against the CRD's schema, and a malformed one is not", () => {
    expect(validate(example), JSON.stringify(validate.errors)).toBe(true);
    const bad = structuredClone(example) as { spec: Spec };
    (bad.spec.tools[0] as Record<string, unknown>).builtin = ["rm_rf"];
    expect(validate(bad)).toBe(false);
  });

  it("a component's fields are exactly the workload spec's (src/workload/spec.ts), so the two cannot drift", () => {
    type Props = { properties: Record<string, { items: { properties: object } }> };
    const spec = (schema.properties as Record<string, Props>).spec!;
    const crdFields = Object.keys(spec.properties.tools!.items.properties).filter((k) => k !== "name").sort();
    const tools = WorkloadSpecSchema.shape.tools;
    const component = (tools.valueType as unknown as { shape: Record<string, unknown> }).shape;
    expect(crdFields).toEqual(Object.keys(component).sort());
    const top = Object.keys(spec.properties).sort();
    expect(top).toEqual(Object.keys(WorkloadSpecSchema.shape).sort());
  });

  it("the example, as the host reads it (tools keyed by name), is a spec Vak accepts", () => {
    const { tools, ...rest } = example.spec;
    const asSpec = { ...rest, tools: Object.fromEntries(tools.map(({ name, ...c }) => [name, c])) };
    expect(WorkloadSpecSchema.safeParse(asSpec).success).toBe(true);
  });
});
