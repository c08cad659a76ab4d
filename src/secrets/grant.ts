import { createHash, randomBytes } from "node:crypto";
import { unhandled } from "../protocol/unhandled.js";

/**
 * A secret granted to one component, resolved by the host, with its declared
 * recipient: an environment variable of that component's commands (for the
 * life of each command); an HTTP header that the egress gate puts on requests
 * to the declared hosts only; or a placeholder in a variable that the gate
 * replaces with the value in the request headers to the declared hosts only.
 * Over HTTPS the gate terminates TLS for those hosts to do so.
 */
export type SecretRecipient =
  | { kind: "env"; name: string }
  /** placeholderEnv: a variable that holds a placeholder for the value, for a program that must name the header itself. */
  | { kind: "header"; header: string; hosts: readonly string[]; placeholderEnv?: string | undefined }
  /** A placeholder in the variable; the egress gate replaces it with the value in request headers to these hosts only (over HTTPS too). */
  | { kind: "placeholder"; name: string; hosts: readonly string[] };

export interface InjectedSecret {
  /** The reference, as granted ("secret:github"); the journal records this, never the value. */
  ref: string;
  value: string;
  recipient: SecretRecipient;
}

export { checkEnvRecipient } from "../policy/secret-ref.js";

export function describeRecipient(r: SecretRecipient): string {
  switch (r.kind) {
    case "env": return `env ${r.name}`;
    case "placeholder": return `placeholder in env ${r.name}, replaced in request headers for ${r.hosts.join(", ")}`;
    case "header": return `header ${r.header} for ${r.hosts.join(", ")}`;
    default: return unhandled(r, "secret recipient");
  }
}

/**
 * What a command sees instead of a header secret: stable per reference and salt (by default the process's),
 * never the value. A resident host serves many runs in one process: each `vak exec` run passes its own salt,
 * so that a placeholder lives no longer than its run, as in-process.
 */
export function placeholderFor(ref: string, salt: string = PLACEHOLDER_SALT): string {
  return `vak-placeholder-${createHash("sha256").update(`${salt}\0${ref}`).digest("hex").slice(0, 24)}`;
}

const PLACEHOLDER_SALT = randomBytes(16).toString("hex");
