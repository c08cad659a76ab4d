import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import ts from "typescript";
import { parseAllDocuments } from "yaml";
import { ROOT } from "./paths.js";

/** Every YAML document under deploy/kubernetes, with the file it came from. */
export interface Manifest {
  file: string;
  doc: Record<string, unknown> & { apiVersion: string; kind: string; metadata?: { name?: string } };
}

export const DEPLOY = join(ROOT, "deploy/kubernetes");

export function manifests(dir = DEPLOY): Manifest[] {
  const out: Manifest[] = [];
  for (const e of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (!e.isFile() || !/\.ya?ml$/.test(e.name)) continue;
    const path = join(e.parentPath, e.name);
    for (const d of parseAllDocuments(readFileSync(path, "utf8"))) {
      if (d.errors.length) throw new Error(`${path}: ${d.errors[0]!.message}`);
      const doc = d.toJSON() as Manifest["doc"] | null;
      if (doc) out.push({ file: relative(DEPLOY, path), doc });
    }
  }
  return out;
}

/** The kubernetes-models module and type of each kind the manifests use (Kubernetes 1.34's OpenAPI). */
export const MODELS: Record<string, { module: string; type: string }> = {
  "v1/Namespace": { module: "kubernetes-models/v1/Namespace", type: "INamespace" },
  "v1/ServiceAccount": { module: "kubernetes-models/v1/ServiceAccount", type: "IServiceAccount" },
  "v1/ConfigMap": { module: "kubernetes-models/v1/ConfigMap", type: "IConfigMap" },
  "v1/Secret": { module: "kubernetes-models/v1/Secret", type: "ISecret" },
  "apps/v1/Deployment": { module: "kubernetes-models/apps/v1/Deployment", type: "IDeployment" },
  "networking.k8s.io/v1/NetworkPolicy": { module: "kubernetes-models/networking.k8s.io/v1/NetworkPolicy", type: "INetworkPolicy" },
  "node.k8s.io/v1/RuntimeClass": { module: "kubernetes-models/node.k8s.io/v1/RuntimeClass", type: "IRuntimeClass" },
  "apiextensions.k8s.io/v1/CustomResourceDefinition": { module: "kubernetes-models/apiextensions.k8s.io/v1/CustomResourceDefinition", type: "ICustomResourceDefinition" },
  "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy": { module: "kubernetes-models/admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy", type: "IValidatingAdmissionPolicy" },
  "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicyBinding": { module: "kubernetes-models/admissionregistration.k8s.io/v1/ValidatingAdmissionPolicyBinding", type: "IValidatingAdmissionPolicyBinding" },
  "kustomize.config.k8s.io/v1beta1/Kustomization": { module: "", type: "" },
};

export const keyOf = (m: Manifest) => `${m.doc.apiVersion}/${m.doc.kind}`;

/**
 * Unknown fields, by the type checker: each manifest becomes an object literal
 * typed with its kind's interface from kubernetes-models, so that a misspelt
 * field at any depth (`hostUser`, `readOnlyRootFileSystem`) is an error, as
 * `kubectl apply --validate=strict` would make it. The schemas' own
 * validators (required fields, types, enums) do not refuse unknown fields.
 */
export function unknownFields(ms: Manifest[]): string[] {
  const lines: string[] = [];
  const imports = new Set<string>();
  ms.forEach((m, i) => {
    const model = MODELS[keyOf(m)];
    if (!model?.module) return;
    imports.add(`import type { ${model.type} } from "${model.module}";`);
    lines.push(`// ${m.file}\nexport const m${i}: ${model.type} = ${JSON.stringify(m.doc)};`);
  });
  const source = [...imports, ...lines].join("\n");
  const name = join(ROOT, "test/deploy/__manifests__.ts");
  const options: ts.CompilerOptions = { strict: true, noEmit: true, module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext, target: ts.ScriptTarget.ES2022, skipLibCheck: true, types: [] };
  const host = ts.createCompilerHost(options);
  const read = host.getSourceFile.bind(host);
  host.getSourceFile = (f, lang, onError) => (f === name ? ts.createSourceFile(f, source, lang) : read(f, lang, onError));
  const fileExists = host.fileExists.bind(host);
  host.fileExists = (f) => f === name || fileExists(f);
  const program = ts.createProgram([name], options, host);
  return ts.getPreEmitDiagnostics(program).map((d) => {
    const text = ts.flattenDiagnosticMessageText(d.messageText, "\n");
    const at = d.file && d.start !== undefined ? d.file.getLineAndCharacterOfPosition(d.start) : undefined;
    const file = at ? (source.split("\n")[at.line - 1] ?? "").replace(/^\/\/ /, "") : "";
    return `${file}: ${text.split("\n").slice(-1)[0]}`;
  });
}
