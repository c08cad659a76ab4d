import { execFile, execFileSync } from "node:child_process";
import { closeSync, constants, fstatSync, mkdirSync, openSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { z } from "zod";
import { SECRET_NAME, type SecretRef } from "../policy/secret-ref.js";
import { VakError } from "../policy/errors.js";
import { vakDirs } from "../policy/state.js";
import { unhandled } from "../protocol/unhandled.js";

/**
 * Secrets by reference. A grant names a secret as `secret:NAME` (Vak's store,
 * a user-tier file that must be 0600 and yours), `env:NAME` (the host's
 * environment) or `cmd:NAME` (a command the user configured, for a password
 * manager). The host resolves a reference when it injects the value; the
 * value never appears in a spec, the journal or anything a model is sent.
 */
export { parseRef, SECRET_NAME, type SecretRef } from "../policy/secret-ref.js";

const StoreFile = z
  .object({
    version: z.literal(1),
    secrets: z.record(z.string().regex(SECRET_NAME), z.object({ value: z.string().min(1), created: z.string() }).strict()),
  })
  .strict();
type StoreData = z.infer<typeof StoreFile>;

export function storePath(env: NodeJS.ProcessEnv = process.env): string {
  return join(vakDirs(env).config, "secrets.json");
}

/** Vak's own secret store: one JSON file, 0600, in the user's config directory. */
export class SecretStore {
  constructor(readonly path: string = storePath()) {}

  /** Reads the store, refusing a file anyone but its owner could read or that is not the caller's. */
  private load(): StoreData {
    let fd: number;
    try {
      fd = openSync(this.path, constants.O_RDONLY | constants.O_NOFOLLOW);
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      if (code === "ENOENT") return { version: 1, secrets: {} };
      if (code === "ELOOP") throw new VakError("bad-input", `${this.path} is a symbolic link; the secret store must be a plain file`);
      throw new VakError("bad-input", `${this.path}: cannot be read (${(e as Error).message})`);
    }
    try {
      const st = fstatSync(fd);
      if (!st.isFile()) throw new VakError("bad-input", `${this.path} is not a regular file`);
      if (st.mode & 0o077)
        throw new VakError("bad-input", `${this.path} is readable by others (mode ${(st.mode & 0o777).toString(8).padStart(4, "0")}); refusing to use it. Run: chmod 600 ${this.path}`);
      if (process.getuid && st.uid !== process.getuid()) throw new VakError("bad-input", `${this.path} belongs to another user (uid ${st.uid}); refusing to use it`);
      const r = StoreFile.safeParse(JSON.parse(readFileSync(fd, "utf8")));
      if (!r.success) throw new VakError("bad-input", `${this.path}: not a Vak secret store (${r.error.issues[0]!.message})`);
      return r.data;
    } catch (e) {
      if (e instanceof VakError) throw e;
      throw new VakError("bad-input", `${this.path}: not valid JSON`);
    } finally {
      closeSync(fd);
    }
  }

  /** Writes the whole store atomically, 0600 from the first byte. */
  private save(data: StoreData): void {
    mkdirSync(dirname(this.path), { recursive: true, mode: 0o700 });
    const tmp = `${this.path}.${process.pid}.tmp`;
    writeFileSync(tmp, `${JSON.stringify(data, null, 2)}\n`, { mode: 0o600, flag: "wx" });
    renameSync(tmp, this.path);
  }

  names(): string[] {
    return Object.keys(this.load().secrets).sort();
  }

  get(name: string): string | undefined {
    return this.load().secrets[name]?.value;
  }

  set(name: string, value: string): void {
    if (!SECRET_NAME.test(name)) throw new VakError("bad-input", `"${name}" is not a valid secret name (letters, digits, _ . -)`);
    if (!value) throw new VakError("bad-input", `the value for ${name} is empty`);
    const data = this.load();
    data.secrets[name] = { value, created: new Date().toISOString() };
    this.save(data);
  }

  remove(name: string): boolean {
    const data = this.load();
    if (!(name in data.secrets)) return false;
    delete data.secrets[name];
    this.save(data);
    return true;
  }
}

/** Commands for cmd: references come from the user's config only. */
export type SecretCommands = Record<string, readonly string[]>;

/** Resolves a reference to its value on the host; a missing secret fails closed, naming the reference. */
export function resolveRef(ref: SecretRef, opts: { store?: SecretStore; env?: NodeJS.ProcessEnv; commands?: SecretCommands; cwd?: string } = {}): string {
  const kind = ref.kind;
  switch (kind) {
    case "env": {
      const v = (opts.env ?? process.env)[ref.name];
      if (!v) throw new VakError("bad-input", `${ref.text}: the host environment has no ${ref.name}`);
      return v;
    }
    case "secret": {
      const store = opts.store ?? new SecretStore();
      const v = store.get(ref.name);
      if (v === undefined) throw new VakError("bad-input", `${ref.text}: no such secret in ${store.path}; add it with: vak secret set ${ref.name}`);
      return v;
    }
    case "cmd": return fromCommand(ref, opts.commands, opts.env, opts.cwd);
    default: return unhandled(kind, "secret reference kind");
  }
}

/** A cmd: reference: the output of the command the user's config names. */
function fromCommand(ref: SecretRef, commands: SecretCommands | undefined, env?: NodeJS.ProcessEnv, cwd?: string): string {
  const argv = commandOf(ref, commands);
  let out: string;
  try {
    // In the caller's environment and cwd: the resident host's client's, not the host's own.
    out = execFileSync(argv[0]!, argv.slice(1), { ...commandOptions(env, cwd), stdio: ["ignore", "pipe", "pipe"] });
  } catch (e) {
    throw commandFailed(ref, argv, (e as NodeJS.ErrnoException).code ?? `exit ${(e as { status?: number }).status}`);
  }
  return commandValue(ref, argv, out);
}

/**
 * resolveRef without holding the thread while a cmd: reference's command runs (a password manager may take
 * seconds): the resident host serves every client on one thread, and `vak exec` resolves its secrets this way.
 */
export async function resolveRefAsync(ref: SecretRef, opts: { store?: SecretStore; env?: NodeJS.ProcessEnv; commands?: SecretCommands; cwd?: string } = {}): Promise<string> {
  if (ref.kind !== "cmd") return resolveRef(ref, opts);
  const argv = commandOf(ref, opts.commands);
  const out = await new Promise<string>((resolve, reject) => {
    const child = execFile(argv[0]!, argv.slice(1), commandOptions(opts.env, opts.cwd), (e, stdout) => {
      if (!e) return resolve(stdout);
      const x = e as NodeJS.ErrnoException & { killed?: boolean };
      // As execFileSync says them: an errno name, ETIMEDOUT for the timeout, else the exit status.
      reject(commandFailed(ref, argv, typeof x.code === "string" ? x.code : x.killed ? "ETIMEDOUT" : `exit ${x.code}`));
    });
    child.stdin?.end();
  });
  return commandValue(ref, argv, out);
}

const commandOptions = (env: NodeJS.ProcessEnv | undefined, cwd: string | undefined) => ({ encoding: "utf8" as const, timeout: 30_000, maxBuffer: 64 * 1024, env: env ?? process.env, cwd });

function commandOf(ref: SecretRef, commands: SecretCommands | undefined): readonly string[] {
  const argv = commands && Object.hasOwn(commands, ref.name) ? commands[ref.name] : undefined;
  if (!argv?.length) throw new VakError("bad-input", `${ref.text}: no command named ${ref.name} in [secret_commands] of ~/.config/vak/config.toml`);
  return argv;
}

/** Not the command's output: it might hold the value. */
const commandFailed = (ref: SecretRef, argv: readonly string[], why: string) => new VakError("bad-input", `${ref.text}: the command ${argv[0]} failed (${why})`);

function commandValue(ref: SecretRef, argv: readonly string[], out: string): string {
  const v = out.replace(/\r?\n$/, "");
  if (!v) throw new VakError("bad-input", `${ref.text}: the command ${argv[0]} printed nothing`);
  return v;
}
