#!/usr/bin/env node
// Prints the container engine's (and Kubernetes' Localhost) seccomp profile made from the launcher's own
// table: node scripts/seccomp-profile.mjs [--no-net] > deploy/kubernetes/seccomp/vak-launcher.json
// test/deploy/manifests.test.ts checks that the committed file is what this prints.
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("..", import.meta.url));
const { containerProfile, syscallNames } = await import(`${root}dist/sandbox/container-seccomp.js`);
const table = JSON.parse(execFileSync(`${root}build/Release/vak-launcher`, ["--seccomp-table"], { encoding: "utf8" }));
const header = ["/usr/include/x86_64-linux-gnu/asm/unistd_64.h", "/usr/include/asm/unistd_64.h"].find((p) => existsSync(p));
if (!header) throw new Error("unistd_64.h not found: install linux-libc-dev");
process.stdout.write(JSON.stringify(containerProfile(table, syscallNames(readFileSync(header, "utf8")), !process.argv.includes("--no-net")), null, 1) + "\n");
