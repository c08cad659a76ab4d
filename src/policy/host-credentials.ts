import { lstatSync, readdirSync, realpathSync } from "node:fs";
import { basename, dirname, isAbsolute, join, resolve } from "node:path";
import type { HeldPath } from "./chain.js";
import { VakError } from "./errors.js";
import { expandValue } from "./expand.js";
import { isWithin } from "./paths.js";

/**
 * The host's credential stores: where other tools keep what logs the user in. A grant that covers one only
 * because it covers a parent (the workspace is HOME, `--allow-read ~`, a profile's `~/.config`) does not show
 * it: the view masks it as `--deny-read` does, the guard refuses it with a line naming it, and one that does
 * not exist yet may not be made where a writable grant reaches it (a planted `~/.kube/config` names a command
 * kubectl runs, a planted `~/.aws/credentials` an account the host's aws then uses). A grant of that very file
 * or directory (`--allow-read ~/.aws`, a profile line naming it) shows it: the user asked for it by name.
 *
 * Paths are spelled as a profile's are (`~`, `${NAME}`, `${NAME:-fallback}`, a variable only at the start); an
 * entry whose variable is unset applies nowhere. Both the default place and the one a variable moves it to are hidden:
 * what is left at the default is a credential too. `lists` are variables holding a `:`-separated list of
 * files (KUBECONFIG). Deny by default: a directory that holds keys among other things is hidden whole, unless
 * it also holds logs and caches by the thousand (gcloud, Azure, kube, docker), where the credentials are named.
 */
export interface CredentialStore {
  readonly name: string;
  readonly why: string;
  readonly paths: readonly string[];
  readonly lists?: readonly string[];
}

const store = (name: string, why: string, paths: string[], lists?: string[]): CredentialStore => ({ name, why, paths, ...(lists ? { lists } : {}) });
const XDG = "${XDG_CONFIG_HOME:-~/.config}";
// Where a tool keeps logs and caches of thousands of files beside its credentials, the credentials are named one by
// one: a hidden file's other hard links are searched for under every grant (deny-read.ts), which walks what is hidden.
const GCLOUD = ["credentials.db", "access_tokens.db", "legacy_credentials", "application_default_credentials.json"];
const AZURE = ["msal_token_cache.json", "msal_token_cache.bin", "msal_http_cache.bin", "service_principal_entries.json", "service_principal_entries.bin", "accessTokens.json"];

export const HOST_CREDENTIALS: readonly CredentialStore[] = [
  // Keys and password stores.
  store("SSH", "private keys, under any name", ["~/.ssh"]),
  store("GnuPG", "private keys (private-keys-v1.d, secring.gpg) and the agent's socket that signs with them", ["${GNUPGHOME}", "~/.gnupg"]),
  store("pass", "the password store", ["${PASSWORD_STORE_DIR}", "~/.password-store"]),
  store("age and SOPS", "age private keys", ["${SOPS_AGE_KEY_FILE}", `${XDG}/sops/age`, "~/.config/sops/age"]),
  store("desktop keyrings", "GNOME Keyring's and KWallet's stored passwords", ["${XDG_DATA_HOME:-~/.local/share}/keyrings", "~/.local/share/keyrings", "~/.local/share/kwalletd"]),
  store("1Password CLI", "its session and account keys", [`${XDG}/op`, "~/.config/op", "~/.op"]),

  // Clouds and clusters.
  store("AWS", "access keys, SSO and CLI token caches, credential_process commands", ["~/.aws", "${AWS_SHARED_CREDENTIALS_FILE}", "${AWS_CONFIG_FILE}", "${AWS_WEB_IDENTITY_TOKEN_FILE}"]),
  store("Google Cloud SDK", "OAuth tokens, refresh tokens and service account keys", GCLOUD.flatMap((f) => ["${CLOUDSDK_CONFIG}", `${XDG}/gcloud`, "~/.config/gcloud"].map((d) => `${d}/${f}`)).concat(["${GOOGLE_APPLICATION_CREDENTIALS}", "~/.boto"])),
  store("Azure CLI", "its token cache and service principal secrets", AZURE.flatMap((f) => [`\${AZURE_CONFIG_DIR}/${f}`, `~/.azure/${f}`])),
  store("Oracle Cloud CLI", "API signing keys", ["~/.oci"]),
  store("Kubernetes", "kubeconfig tokens, client keys and the exec plugins kubectl runs", ["~/.kube/config"], ["KUBECONFIG"]),
  store("Docker", "registry auths (config.json) and TLS client keys (key.pem, contexts/tls)", ["${DOCKER_CONFIG}/config.json", "${DOCKER_CONFIG}/contexts/tls", "~/.docker/config.json", "~/.docker/contexts/tls", "~/.docker/key.pem", "${DOCKER_CERT_PATH}/key.pem"]),
  store("Podman, Buildah, Skopeo", "registry auths", ["${REGISTRY_AUTH_FILE}", `${XDG}/containers/auth.json`, "~/.config/containers/auth.json", "${XDG_RUNTIME_DIR}/containers/auth.json"]),
  store("Terraform", "Terraform Cloud tokens", ["${TF_CLI_CONFIG_FILE}", "~/.terraformrc", "~/.terraform.d/credentials.tfrc.json"]),
  store("Pulumi", "its access token", ["${PULUMI_HOME}/credentials.json", "~/.pulumi/credentials.json"]),
  store("Vault", "its token", ["~/.vault-token"]),
  store("rclone", "remotes' passwords and tokens", ["${RCLONE_CONFIG}", `${XDG}/rclone/rclone.conf`, "~/.config/rclone/rclone.conf"]),
  store("s3cmd", "access keys", ["~/.s3cfg"]),
  store("Databricks", "its tokens", ["~/.databrickscfg"]),

  // Forges, registries, package managers.
  store("GitHub CLI", "its OAuth tokens (hosts.yml)", ["${GH_CONFIG_DIR}/hosts.yml", `${XDG}/gh/hosts.yml`, "~/.config/gh/hosts.yml"]),
  store("hub", "its GitHub token", ["${HUB_CONFIG}", `${XDG}/hub`, "~/.config/hub"]),
  store("GitLab CLI", "its tokens", ["${GLAB_CONFIG_DIR}", `${XDG}/glab-cli`, "~/.config/glab-cli"]),
  store("git", "passwords kept by credential.helper store", ["~/.git-credentials", `${XDG}/git/credentials`, "~/.config/git/credentials"]),
  store("netrc", "passwords for hosts (curl, git, pip, ftp)", ["${NETRC}", "~/.netrc", "~/_netrc"]),
  store("npm", "registry tokens (_authToken, _auth, a client key)", ["${NPM_CONFIG_USERCONFIG}", "${npm_config_userconfig}", "~/.npmrc"]),
  store("Yarn", "npmAuthToken", ["~/.yarnrc.yml"]),
  store("PyPI", "upload passwords and tokens", ["~/.pypirc"]),
  store("Cargo", "crates.io tokens", ["${CARGO_HOME}/credentials.toml", "${CARGO_HOME}/credentials", "~/.cargo/credentials.toml", "~/.cargo/credentials"]),
  store("RubyGems", "API keys", ["~/.gem/credentials", "~/.local/share/gem/credentials"]),
  store("Composer", "registry tokens", ["${COMPOSER_HOME}/auth.json", `${XDG}/composer/auth.json`, "~/.config/composer/auth.json", "~/.composer/auth.json"]),
  store("Maven", "server passwords and the master password", ["~/.m2/settings.xml", "~/.m2/settings-security.xml"]),
  store("Gradle", "repository and signing passwords", ["${GRADLE_USER_HOME}/gradle.properties", "~/.gradle/gradle.properties"]),
  store("PostgreSQL", "passwords (.pgpass)", ["${PGPASSFILE}", "~/.pgpass"]),
  store("MySQL", "passwords (.my.cnf, .mylogin.cnf)", ["~/.my.cnf", "~/.mylogin.cnf"]),

  // Agent CLIs' logins (their presets deny them too; this holds without a preset).
  store("Codex", "its login (auth.json) and MCP servers' OAuth tokens", ["${CODEX_HOME}/auth.json", "${CODEX_HOME}/.credentials.json", "~/.codex/auth.json", "~/.codex/.credentials.json"]),
  store("Claude Code", "its login", ["${CLAUDE_CONFIG_DIR}/.credentials.json", "~/.claude/.credentials.json"]),
  store("Gemini CLI", "its login and MCP servers' OAuth tokens", ["~/.gemini/oauth_creds.json", "~/.gemini/mcp-oauth-tokens.json"]),
];

/** One place a store is kept, for this home and environment (absolute, as written: not resolved). */
export interface StorePath {
  readonly path: string;
  readonly store: CredentialStore;
}

/** Every place the host keeps a credential store: the defaults, and where a variable moves them. Reads nothing. */
export function credentialPaths(home: string, env: NodeJS.ProcessEnv, stores: readonly CredentialStore[] = HOST_CREDENTIALS): StorePath[] {
  const out: StorePath[] = [];
  const seen = new Set<string>();
  const h = home.length > 1 && home.endsWith("/") ? home.slice(0, -1) : home;
  // Spelled as a profile's paths are (expand.ts); a variable's value is the host's to spell: made absolute (from
  // HOME: a relative one is the tool's, from wherever it runs) and normal.
  const add = (p: string, s: CredentialStore) => {
    const abs = resolve(h, p);
    if (abs === "/" || seen.has(abs)) return;
    seen.add(abs);
    out.push({ path: abs, store: s });
  };
  for (const s of stores)
    for (const raw of s.paths) {
      const e = /^(?:~\/|\/|\$\{)/.test(raw) ? expandValue(raw, env, h) : undefined;
      if (e?.ok) add(e.value, s);
      // An unset variable without a fallback: the spelling applies nowhere.
      else if (e?.unset === undefined) throw new VakError("internal", `host-credentials: ${raw}: spell a store as ~/path, /path, \${NAME}path or \${NAME:-fallback}path`);
    }
  // After every store's own paths, so that the first store to name a path keeps its description.
  for (const s of stores) for (const v of s.lists ?? []) for (const p of (env[v] ?? "").split(":")) if (p !== "") add(p, s);
  return out;
}

export interface Hidden {
  /** Stores that exist (or what a store holds besides a part granted by name): masked, their reads refused with a line. Canonical. */
  masked: HeldPath[];
  /** Stores that do not exist where a writable grant reaches: never made (an absolute guard rule). Canonical. */
  absent: HeldPath[];
  /** Directory stores a grant reaches inside of: bound read-only, all but the granted part masked (`masked`). */
  opened: { path: string; why: string; writableInside: boolean }[];
}

/**
 * The stores a plan hides: those a grant shows only because it covers a parent of them. `roots` are the
 * plan's canonical grants (the workspace too) with their access; `named` the canonical paths a profile named
 * to be read whose content is shown as it is (an `allow_read_redacted` file holding nothing to strip). A
 * store is shown when a grant or a named path is that very store, or a store that holds it (`--allow-read
 * ~/.aws` shows `AWS_SHARED_CREDENTIALS_FILE=~/.aws/creds` too). A grant inside a store (`--allow-read
 * ~/.aws/credentials`, the workspace HOME) shows that part only: the store is bound read-only and everything
 * else in it, on the way down to the grant, is masked. Reads the file system only for stores below a root (a
 * lstat and a realpath each), and lists a store's directories only where a grant lies inside it.
 */
export function hiddenStores(paths: readonly StorePath[], roots: ReadonlyMap<string, "ro" | "rw">, named: () => readonly string[]): Hidden {
  const keys = [...roots.keys()];
  const candidates = paths.filter((s) => keys.some((r) => isWithin(s.path, r)));
  if (candidates.length === 0) return { masked: [], absent: [], opened: [] };
  const look: Look = { canon: new Map(), lists: new Map(), listed: (dir) => keys.some((r) => isWithin(dir, r)) };
  const found = candidates.map((s) => {
    const c = resolved(s.path, look);
    return { path: s.path, store: s.store, real: c.real, exists: c.exists };
  });
  const storeSet = new Set(found.map((f) => f.real));
  const asked = [...keys, ...named()];
  let masked: HeldPath[] = [];
  const absent: HeldPath[] = [];
  const opened: Hidden["opened"] = [];
  // Outer stores first, so that one inside a store already hidden or opened is left to it.
  found.sort((a, b) => a.real.length - b.real.length);
  const handled = new Set<string>();
  const askedStores = new Set(asked.filter((r) => storeSet.has(r)));
  for (const f of found) {
    const shownBy = keys.filter((r) => r !== f.real && isWithin(f.real, r));
    if (shownBy.length === 0 || atOrUnder(f.real, handled)) continue; // out of the view, its own grant's, or in a store already hidden
    // Asked for by name: the store itself, or a store that holds it.
    if (atOrUnder(f.real, askedStores)) continue;
    handled.add(f.real);
    if (!f.exists) {
      if (shownBy.some((r) => roots.get(r) === "rw")) absent.push({ path: f.real, why: hiddenWhy(f.store, f.real, "made") });
      continue;
    }
    const inner = keys.filter((r) => r !== f.real && isWithin(r, f.real));
    if (inner.length === 0) {
      masked.push({ path: f.real, why: hiddenWhy(f.store, f.real, "read") });
      continue;
    }
    opened.push({ path: f.real, why: hiddenWhy(f.store, f.real, "part"), writableInside: inner.some((r) => roots.get(r) === "rw") });
    maskAround(f.real, inner, keys, hiddenWhy(f.store, f.real, "read"), masked);
  }
  masked = dedupe(masked);
  return { masked, absent: dedupe(absent), opened };
}

/** Everything in dir but the granted paths inside it, and the way down to them: masked (a link's target where a grant shows it). */
function maskAround(dir: string, inner: readonly string[], keys: readonly string[], why: string, out: HeldPath[]): void {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch (e) {
    throw new VakError("bad-input", `${dir} (a credential store) cannot be listed (${(e as NodeJS.ErrnoException).code ?? String(e)}) to show only the part of it granted by name (${inner.join(", ")}); grant the store itself or nothing inside it`);
  }
  for (const n of names.sort()) {
    const p = join(dir, n);
    if (inner.includes(p)) continue;
    if (inner.some((r) => isWithin(r, p))) {
      maskAround(p, inner, keys, why, out);
      continue;
    }
    let st;
    try {
      st = lstatSync(p);
    } catch {
      continue; // gone since the listing
    }
    if (!st.isSymbolicLink()) {
      out.push({ path: p, why });
      continue;
    }
    // A link cannot be a mount point (the view opens no link); what it leads to is masked where a grant shows it.
    let real: string;
    try {
      real = realpathSync.native(p);
    } catch {
      continue; // leads nowhere
    }
    if (keys.some((r) => isWithin(real, r)) && !inner.some((r) => isWithin(real, r) || isWithin(r, real))) out.push({ path: real, why });
  }
}

function hiddenWhy(s: CredentialStore, path: string, what: "read" | "made" | "part"): string {
  const it = `${s.name}: ${s.why}; a credential store of the host`;
  if (what === "read") return `${it}, hidden under a grant of a parent directory: --allow-read ${path} shows it`;
  if (what === "made") return `${it}, which the sandbox may not make: --allow-write ${path} grants it`;
  return `${it}, shown only in the part granted by name and never written: --allow-write ${path} grants it`;
}

/** Is p in set, or below a path in it? Walks p's parents: a few Set lookups, whatever the set's size. */
function atOrUnder(p: string, set: ReadonlySet<string>): boolean {
  if (set.size === 0) return false;
  for (let d = p; ; ) {
    if (set.has(d)) return true;
    const cut = d.lastIndexOf("/");
    if (cut <= 0) return set.has("/");
    d = d.slice(0, cut);
  }
}

/** Each path once, and none inside another. */
function dedupe(xs: HeldPath[]): HeldPath[] {
  const all = new Set(xs.map((x) => x.path));
  const seen = new Set<string>();
  return xs.filter((x) => !seen.has(x.path) && (seen.add(x.path), true) && !atOrUnder(dirname(x.path), all));
}

interface Canon {
  real: string;
  exists: boolean;
}

/** One plan's look at the file system: canonical paths found, directories listed (each name: is it a link?), and which directories to list. */
interface Look {
  canon: Map<string, Canon>;
  lists: Map<string, Map<string, boolean> | undefined>;
  /** Below a grant, a directory is listed once (its stores are many names in few directories); above, each name is looked at. */
  listed: (dir: string) => boolean;
}

/**
 * The canonical path, a component at a time from the root, each directory once per plan: a component that is
 * no link adds its name to its parent's canonical path (found in the parent's listing, or by one lstat, and none
 * below a parent that is not there); a link is resolved (realpath). What does not exist is its nearest existing
 * parent's canonical path with the rest appended.
 */
function resolved(p: string, look: Look): Canon {
  const hit = look.canon.get(p);
  if (hit) return hit;
  let c: Canon;
  if (p === "/" || !isAbsolute(p)) c = { real: p, exists: true };
  else {
    const parent = resolved(dirname(p), look);
    const name = basename(p);
    const under = parent.real === "/" ? `/${name}` : `${parent.real}/${name}`;
    c = { real: under, exists: false };
    if (parent.exists) {
      const kind = entryKind(parent.real, name, look);
      if (kind === "link") {
        try {
          c = { real: realpathSync.native(p), exists: true };
        } catch {
          // a link that leads nowhere: where it is written
        }
      } else if (kind === "other") c = { real: under, exists: true };
    }
  }
  look.canon.set(p, c);
  return c;
}

function entryKind(dir: string, name: string, look: Look): "link" | "other" | undefined {
  if (look.listed(dir)) {
    let list = look.lists.get(dir);
    if (!look.lists.has(dir)) {
      try {
        list = new Map(readdirSync(dir, { withFileTypes: true }).map((e) => [e.name, e.isSymbolicLink()]));
      } catch {
        list = undefined; // not a directory, or not ours to list: a name at a time
      }
      look.lists.set(dir, list);
    }
    if (list) return list.has(name) ? (list.get(name) ? "link" : "other") : undefined;
  }
  let st;
  try {
    st = lstatSync(`${dir === "/" ? "" : dir}/${name}`, { throwIfNoEntry: false });
  } catch {
    return undefined;
  }
  return st ? (st.isSymbolicLink() ? "link" : "other") : undefined;
}
