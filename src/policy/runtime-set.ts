/**
 * The runtime set: what ordinary programs need in order to start, and nothing
 * more. It is listed here and nowhere else. It never includes the user's home,
 * other users' files, or Vak's own state; the sandbox gets an empty private
 * HOME and /tmp instead.
 */

/** System directories, read-only. On merged-/usr systems the top-level ones are symlinks. */
export const RUNTIME_DIRS = ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"] as const;

/** The few /etc entries that loaders, libc, TLS, locales and shells read. */
export const RUNTIME_ETC = [
  "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d",
  "/etc/nsswitch.conf", "/etc/host.conf", "/etc/protocols", "/etc/services",
  "/etc/localtime", "/etc/timezone",
  "/etc/ssl", "/etc/ca-certificates", "/etc/ca-certificates.conf", "/etc/pki",
  "/etc/alternatives", "/etc/mime.types", "/etc/magic", "/etc/magic.mime",
  "/etc/locale.alias", "/etc/locale.conf", "/etc/default/locale",
  "/etc/os-release", "/etc/debian_version", "/etc/lsb-release",
  "/etc/bash.bashrc", "/etc/profile", "/etc/profile.d", "/etc/inputrc", "/etc/terminfo",
  "/etc/python3", "/etc/perl", "/etc/vim",
  // Debian's JDKs keep their security configuration here (conf/security links to it): without it no JVM starts.
  "/etc/java-11-openjdk", "/etc/java-17-openjdk", "/etc/java-21-openjdk", "/etc/java-25-openjdk",
] as const;

/** Character devices bound from the host. */
export const RUNTIME_DEVICES = ["/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty"] as const;

/** Private, empty, writable, discarded at exit. Sizes bound memory use. */
export const PRIVATE_TMP = { path: "/tmp", bytes: 1 << 30 } as const;
export const PRIVATE_SHM = { path: "/dev/shm", bytes: 64 << 20 } as const;
export const PRIVATE_HOME_BYTES = 1 << 30;

export const SANDBOX_HOSTNAME = "vak";

/** Files written into the view instead of bound from the host, so that host
 *  accounts and host names do not leak in. */
export function synthesizedEtc(user: { name: string; uid: number; gid: number; home: string; shell: string }): Record<string, string> {
  const passwd = [`root:x:0:0:root:/root:/bin/sh`];
  if (user.uid !== 0) passwd.push(`${user.name}:x:${user.uid}:${user.gid}:${user.name}:${user.home}:${user.shell}`);
  passwd.push("nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin");
  const group = ["root:x:0:"];
  if (user.gid !== 0) group.push(`${user.name}:x:${user.gid}:`);
  group.push("nogroup:x:65534:");
  return {
    "/etc/passwd": passwd.join("\n") + "\n",
    "/etc/group": group.join("\n") + "\n",
    "/etc/hosts": `127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost\n127.0.1.1\t${SANDBOX_HOSTNAME}\n`,
    "/etc/hostname": `${SANDBOX_HOSTNAME}\n`,
    // The sandbox's own resolver (native/resolver.c), which answers every name at once: names resolve only at the egress gate.
    "/etc/resolv.conf": "nameserver 127.0.0.1\noptions timeout:1 attempts:1\n",
  };
}
