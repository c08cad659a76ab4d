/**
 * Which of this host's files go into the container backend's image: the
 * runtime set's /etc entries and top-level links, the files of a list of the
 * host's own Debian packages and everything they depend on, the Node.js Vak
 * runs on, and Vak's launcher. No registry is involved: the image is made of
 * what is installed here. Deciding is pure (the package database comes in as
 * text); reading the disk is the caller's.
 */

/** What a coding agent's commands usually need, if the host has it. `--package NAME` adds more. */
export const DEFAULT_PACKAGES = [
  "base-files", "libc-bin", "bash", "dash", "coreutils", "findutils", "grep", "sed", "mawk", "gawk", "diffutils", "patch",
  "tar", "gzip", "xz-utils", "bzip2", "zstd", "unzip", "util-linux", "procps", "psmisc", "attr", "file", "less",
  "ca-certificates", "tzdata", "hostname", "iproute2", "git", "ripgrep", "python3", "perl", "make", "curl", "jq", "strace",
] as const;

/** Trees of a package that no command needs to run: documentation and translations. */
const SKIPPED = [/^\/usr\/share\/(doc|man|info|lintian|bug|locale)\//, /^\/etc\//];

export interface InstalledPackage {
  name: string;
  depends: string[][];
  provides: string[];
}

/** `dpkg-query -W -f='${binary:Package}\t${db:Status-Abbrev}\t${Depends}\t${Pre-Depends}\t${Provides}\n'` as a map of installed packages. */
export function parseInstalled(text: string): Map<string, InstalledPackage> {
  const m = new Map<string, InstalledPackage>();
  const alternatives = (field: string) =>
    field.split(",").map((g) => g.trim()).filter(Boolean).map((g) => g.split("|").map((a) => a.trim().split(/[\s(]/)[0]!.replace(/:any$/, "")).filter(Boolean));
  for (const line of text.split("\n")) {
    const [pkg, status, dep = "", pre = "", prov = ""] = line.split("\t");
    if (!pkg || !status?.startsWith("ii")) continue;
    const name = pkg.replace(/:[a-z0-9]+$/, "");
    m.set(name, { name, depends: [...alternatives(dep), ...alternatives(pre)], provides: alternatives(prov).flat() });
  }
  return m;
}

/**
 * The packages to take: the wanted ones that are installed, and what they
 * depend on, each alternative group by its first installed member (or an
 * installed package that provides it). Returns them sorted, and the wanted
 * ones the host does not have.
 */
export function dependencyClosure(wanted: readonly string[], installed: ReadonlyMap<string, InstalledPackage>): { packages: string[]; missing: string[] } {
  const providers = new Map<string, string>();
  for (const p of installed.values()) for (const v of p.provides) if (!providers.has(v)) providers.set(v, p.name);
  const resolve = (n: string) => (installed.has(n) ? n : providers.get(n));
  const seen = new Set<string>();
  const missing: string[] = [];
  const stack: string[] = [];
  for (const w of wanted) {
    const r = resolve(w);
    if (r) stack.push(r);
    else missing.push(w);
  }
  while (stack.length) {
    const n = stack.pop()!;
    if (seen.has(n)) continue;
    seen.add(n);
    for (const group of installed.get(n)?.depends ?? []) {
      const pick = group.map(resolve).find((x): x is string => x !== undefined);
      if (pick && !seen.has(pick)) stack.push(pick);
    }
  }
  return { packages: [...seen].sort(), missing };
}

/** The paths a package list names that belong in the image (dpkg -L prints directories too). */
export function packagePaths(dpkgList: string): string[] {
  const out = new Set<string>();
  for (const raw of dpkgList.split("\n")) {
    const p = raw.trim();
    if (!p.startsWith("/") || p === "/." || SKIPPED.some((r) => r.test(p))) continue;
    out.add(p);
  }
  return [...out];
}

/** Every ancestor directory of each path, so that an archive made without recursion has them. */
export function withAncestors(paths: Iterable<string>): string[] {
  const out = new Set<string>();
  for (const p of paths) {
    out.add(p);
    for (let d = p.slice(0, p.lastIndexOf("/")); d.length > 0; d = d.slice(0, d.lastIndexOf("/"))) out.add(d);
  }
  return [...out].sort();
}
