import { fstatSync } from "node:fs";

/**
 * The descriptors of make's jobserver that `vak exec --full-access` hands on to its command, as the command would
 * get them without Vak. Node marks every descriptor from 0 to 15 it inherited close-on-exec as it starts
 * (libuv's uv_disable_stdio_inheritance), which is where make puts the jobserver's pipe (MAKEFLAGS
 * --jobserver-auth=R,W; --jobserver-fds in make before 4.2; cargo's CARGO_MAKEFLAGS the same): a sub-make run
 * through Vak then fell back to -j1. Only those named, and only when they are open pipes or FIFOs; make 4.4's
 * `fifo:PATH` needs none. Any other descriptor from 3 to 15 stays withheld (known debt: Node leaves no trace of
 * which it inherited); above 15, past the first closed number, Node leaves them as they were.
 */
export function jobserverFds(env: NodeJS.ProcessEnv): number[] {
  const fds = new Set<number>();
  for (const name of ["MAKEFLAGS", "MFLAGS", "CARGO_MAKEFLAGS"])
    for (const m of (env[name] ?? "").matchAll(/--jobserver-(?:auth|fds)=(\d{1,4}),(\d{1,4})(?!\d)/g))
      for (const fd of [Number(m[1]), Number(m[2])]) if (fd > 2 && fd < 1024 && isPipe(fd)) fds.add(fd);
  return [...fds].sort((a, b) => a - b);
}

function isPipe(fd: number): boolean {
  try {
    return fstatSync(fd).isFIFO();
  } catch {
    return false;
  }
}

/** spawn's stdio for the command: its own 0-2, then each of fds at its own number (libuv clears close-on-exec there), the rest untouched. */
export function withFds<T>(stdio: readonly T[], fds: readonly number[]): (T | number | "ignore")[] {
  const top = Math.max(2, ...fds);
  return [...stdio, ...Array.from({ length: top - 2 }, (_, i) => (fds.includes(i + 3) ? i + 3 : ("ignore" as const)))];
}
