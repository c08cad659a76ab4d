import { fileURLToPath } from "node:url";

export const ROOT = fileURLToPath(new URL("../..", import.meta.url));
export const VAK_BIN = `${ROOT}bin/vak.cjs`;
export const LAUNCHER = `${ROOT}build/Release/vak-launcher`;
