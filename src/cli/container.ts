import { buildImage } from "../sandbox/container-image.js";
import { imageRecordPath, loadContainerImage } from "../sandbox/container.js";
import { fmt, own, processOutput } from "./output.js";

/** `vak container build-image`: the container backend's image, from this host's own files. */
export async function containerBuildImage(opts: { engine?: "docker" | "podman"; package?: string[]; json?: boolean }): Promise<number> {
  const r = await buildImage({ engine: opts.engine, packages: opts.package, log: opts.json ? undefined : (l) => processOutput().err.line(fmt`vak: ${l}`) });
  if (opts.json) {
    processOutput().out.json({ image: r.record.image, engine: r.record.engine, reused: r.reused, files: r.files, bytes: r.bytes, missing: r.missing, seconds: r.seconds, record: imageRecordPath(), profiles: r.record.profiles });
    return 0;
  }
  // The image's name is Vak's own (a tag by content); the engine's name and the counts are shown as values.
  processOutput().out.line(fmt`${own(r.record.image)} (${r.record.engine}, ${r.files} files${own(r.reused ? ", unchanged" : `, ${(r.bytes / 1e6).toFixed(0)} MB`)}, ${own(`${r.seconds.toFixed(1)} s`)})\nuse it with: vak exec --sandbox container -- CMD`);
  return 0;
}

/** `vak container status`: which image `--sandbox container` would run, or why none. */
export function containerStatus(opts: { json?: boolean }): number {
  const img = loadContainerImage();
  if (opts.json) processOutput().out.json({ ok: true, ...img, record: imageRecordPath() });
  else processOutput().out.line(fmt`${own(img.image)} (${img.engine} at ${img.engineBin}); launcher ${img.launcher} matches; seccomp profiles ${img.profiles.none}, ${img.profiles.net}`);
  return 0;
}
