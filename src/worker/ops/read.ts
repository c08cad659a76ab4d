import { closeSync, constants, fstatSync } from "node:fs";
import { openNoFollow, readAll } from "../fsx.js";
import type { OpResult } from "./result.js";
import { cut } from "./result.js";

const MAX_FILE = 64 * 1024 * 1024;
const DEFAULT_LINES = 2000;

/** Reads a text file, by lines: offset is the first line (1-based), limit how many. */
export function read(op: { path: string; offset?: number | undefined; limit?: number | undefined }): OpResult {
  const fd = openNoFollow(op.path, constants.O_RDONLY | constants.O_NONBLOCK);
  try {
    const st = fstatSync(fd);
    if (st.isDirectory()) return { error: { code: "bad-request", message: `${op.path} is a directory; use list` } };
    if (!st.isFile()) return { error: { code: "bad-request", message: `${op.path} is not a regular file` } };
    if (st.size > MAX_FILE) return { error: { code: "too-large", message: `${op.path} is ${st.size} bytes; read it in parts with offset and limit on a smaller copy` } };
    const data = readAll(fd, st.size);
    const got = data.length;
    if (data.subarray(0, 8192).includes(0)) return { output: `(binary file, ${got} bytes)`, truncated: false, data: { bytes: got, binary: true } };
    const lines = data.toString("utf8").split("\n");
    const start = (op.offset ?? 1) - 1;
    const chosen = lines.slice(start, start + (op.limit ?? DEFAULT_LINES));
    const more = start + chosen.length < lines.length;
    return { ...cut(chosen.join("\n")), data: { bytes: got, lines: lines.length, from: start + 1, to: start + chosen.length, more } };
  } finally {
    closeSync(fd);
  }
}
