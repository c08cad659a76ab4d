import { buildImage } from "../sandbox/container-image.js";
import { imageRecordPath, loadContainerImage } from "../sandbox/container.js";
import { visible } from "./visible.js";

/** `vak container build-image`: the container backend's image, from this host's own files. */
export async function containerBuildImage(opts: { engine?: "docker" | "podman"; package?: string[]; json?: boolean }): Promise<number> {
  const r = await buildImage({ engine: opts.engine, packages: opts.package, log: opts.json ? undefined : (l) => process.stderr.write(`vak: ${visible(l)}\n`) });
  if (opts.json) {
    process.stdout.write(JSON.stringify({ image: r.record.image, engine: r.record.engine, reused: r.reused, files: r.files, bytes: r.bytes, missing: r.missing, seconds: r.seconds, record: imageRecordPath(), profiles: r.record.profiles }) + "\n");
    return 0;
  }
  process.stdout.write(`${r.record.image} (${r.record.engine}, ${r.files} files${r.reused ? ", unchanged" : `, ${(r.bytes / 1e6).toFixed(0)} MB`}, ${r.seconds.toFixed(1)} s)\n` +
    `use it with: vak exec --sandbox container -- CMD\n`);
  return 0;
}

/** `vak container status`: which image `--sandbox container` would run, or why none. */
export function containerStatus(opts: { json?: boolean }): number {
  const img = loadContainerImage();
  if (opts.json) process.stdout.write(JSON.stringify({ ok: true, ...img, record: imageRecordPath() }) + "\n");
  else process.stdout.write(`${img.image} (${img.engine} at ${img.engineBin}); launcher ${img.launcher} matches; seccomp profiles ${img.profiles.none}, ${img.profiles.net}\n`);
  return 0;
}
