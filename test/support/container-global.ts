import { execFileSync, spawnSync } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { TestProject } from "vitest/node";
import { ROOT } from "./paths.js";

/** The unprivileged user the container project's tests run vak as, when the run is root's (nobody:nogroup). */
export const CONTAINER_TEST_UID = 65534;

/**
 * The container project's setup, once per run: finds the engine (.ci/run
 * starts one and sets DOCKER_HOST), builds the sandbox image from this host's
 * files with `vak container build-image` (reused when nothing changed), in a
 * cache directory every test file of the project shares. What goes wrong is
 * handed to every test file, which then fails with it: these tests are never
 * skipped silently or counted as passed without an engine.
 */
export default function setup(project: TestProject): void {
  const cache = process.env.VAK_TEST_CONTAINER_CACHE ?? join(tmpdir(), "vak-test-container-cache");
  mkdirSync(cache, { recursive: true, mode: 0o755 });
  chmodSync(cache, 0o755);
  let problem = "";
  const started = Date.now();
  // VAK_TEST_CONTAINER_ENGINE=podman runs the project on Podman instead: its service's socket in CONTAINER_HOST.
  const engine = process.env.VAK_TEST_CONTAINER_ENGINE === "podman" ? "podman" : "docker";
  const hostVar = engine === "podman" ? process.env.CONTAINER_HOST : process.env.DOCKER_HOST;
  if (!hostVar && !existsSync("/var/run/docker.sock") && !existsSync("/run/podman/podman.sock"))
    problem = "no container engine: DOCKER_HOST is unset and no engine socket exists (.ci/run installs docker.io and starts dockerd)";
  else {
    const r = spawnSync(process.execPath, [join(ROOT, "bin/vak.cjs"), "container", "build-image", "--engine", engine, "--json"], {
      env: { ...process.env, XDG_CACHE_HOME: cache }, encoding: "utf8", timeout: 20 * 60_000,
    });
    if (r.status !== 0) problem = `vak container build-image failed (exit ${r.status}): ${(r.stderr || r.error?.message || "").trim().slice(-800)}`;
    else process.stderr.write(`container backend: ${r.stdout.trim()} (${((Date.now() - started) / 1000).toFixed(1)} s)\n`);
  }
  // The tests run vak as an unprivileged user (container-setup.ts): it must read the record and use the engine.
  if (!problem) {
    for (const d of [join(cache, "vak"), join(cache, "vak", "container")]) chmodSync(d, 0o755);
    const sock = (hostVar ?? (engine === "podman" ? "unix:///run/podman/podman.sock" : "unix:///var/run/docker.sock")).replace(/^unix:\/\//, "");
    if (process.getuid?.() === 0 && existsSync(sock)) execFileSync("chgrp", [String(CONTAINER_TEST_UID), sock]);
  }
  project.provide("containerCache", cache);
  project.provide("containerProblem", problem);
  project.provide("containerHome", mkdtempSync(join(tmpdir(), "vak-test-container-home-")));
}

declare module "vitest" {
  export interface ProvidedContext {
    containerCache: string;
    containerProblem: string;
    containerHome: string;
  }
}
