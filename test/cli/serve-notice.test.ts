import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { repositoryServerNotice } from "../../src/cli/serve.js";
import { scratch, type Scratch } from "../support/fs.js";

/** vak serve's notice that a repository's config sets [server] (src/cli/serve.ts): it reads a config's size, no more. */
describe("the notice of a repository's [server] (repositoryServerNotice)", () => {
  let s: Scratch;
  beforeEach(() => {
    s = scratch();
    mkdirSync(join(s.ws, ".vak"));
  });
  afterEach(() => s.cleanup());

  it("names a [server] table, which is ignored", () => {
    writeFileSync(join(s.ws, ".vak", "config.toml"), '[server]\nport = 1\n');
    expect(repositoryServerNotice(s.ws)).toMatch(/sets \[server\]; ignored/);
  });

  it("a repository's file past a config's size is not read at all (gigabytes held the server's start and its memory)", () => {
    // Valid TOML, [server] first: read whole, it would be named.
    writeFileSync(join(s.ws, ".vak", "config.toml"), `[server]\nport = 1\n${"# padding\n".repeat(30_000)}`);
    expect(repositoryServerNotice(s.ws)).toBeUndefined();
  });
});
