import { keepOutOfDumps, withholdInherited } from "../sandbox/native-spawn.js";
import { startHost } from "./host.js";

/** bin/vak.cjs exits through it, as for the CLI: once what was written to stdout and stderr is flushed. */
export { exitWhenFlushed } from "../cli/output.js";

/** The default idle time before the host exits; VAK_HOST_IDLE_SECONDS or --idle-seconds N change it. */
const DEFAULT_IDLE_SECONDS = 300;

/** `vak host [--idle-seconds N]`: runs the resident host in the foreground until it has been idle that long. */
export async function main(argv: string[]): Promise<number> {
  // Started by hand from a shell, as the CLI: what it inherited reaches nothing it starts (the client's start_host closes them).
  withholdInherited();
  keepOutOfDumps();
  const i = argv.indexOf("--idle-seconds");
  const raw = i >= 0 ? argv[i + 1] : process.env.VAK_HOST_IDLE_SECONDS;
  const idle = raw === undefined ? DEFAULT_IDLE_SECONDS : Number(raw);
  if (!Number.isFinite(idle) || idle <= 0 || idle > 86400) {
    process.stderr.write(`vak: host: --idle-seconds needs a number of seconds above 0, at most 86400, got ${JSON.stringify(raw)}\n`);
    return 125;
  }
  try {
    return await new Promise<number>((resolve) => {
      const host = startHost(idle * 1000, () => resolve(0));
      host.server.on("error", (e) => {
        process.stderr.write(`vak: host: ${e.message}\n`);
        resolve(125);
      });
      for (const s of ["SIGTERM", "SIGINT"] as const) process.once(s, () => host.close());
    });
  } catch (e) {
    process.stderr.write(`vak: host: ${(e as Error).message}\n`);
    return 125;
  }
}
