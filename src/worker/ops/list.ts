import { closeSync, constants, readdirSync } from "node:fs";
import { openNoFollow } from "../fsx.js";
import { cut, type OpResult } from "./result.js";

/** Lists a directory: one entry a line, directories with a trailing slash, symlinks with a trailing @. */
export function list(op: { path: string }): OpResult {
  const fd = openNoFollow(op.path, constants.O_RDONLY | constants.O_DIRECTORY);
  try {
    const entries = readdirSync(`/proc/self/fd/${fd}`, { withFileTypes: true })
      .map((e) => e.name + (e.isDirectory() ? "/" : e.isSymbolicLink() ? "@" : ""))
      .sort();
    return { ...cut(entries.join("\n")), data: { entries: entries.length } };
  } finally {
    closeSync(fd);
  }
}
