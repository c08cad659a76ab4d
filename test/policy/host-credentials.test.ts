import { describe, expect, it } from "vitest";
import { credentialPaths } from "../../src/policy/host-credentials.js";
import { expandValue } from "../../src/policy/expand.js";

// Where the host keeps its credential stores, for a home and an environment: spelled as a profile's paths are.
describe("credentialPaths", () => {
  const home = "/h/";
  const at = (env: NodeJS.ProcessEnv) => new Map(credentialPaths(home, env).map((p) => [p.path, p.store.name]));

  it("the defaults are under HOME; a variable moves a store, made absolute from HOME; an unset one applies nowhere", () => {
    const none = at({});
    expect(none.get("/h/.docker/config.json")).toBe("Docker");
    expect([...none.keys()].some((p) => p.includes("${") || p.startsWith("/h//"))).toBe(false);
    const moved = at({ DOCKER_CONFIG: "rel/dock", GNUPGHOME: "~/g", XDG_CONFIG_HOME: "/x/" });
    expect(moved.get("/h/rel/dock/config.json")).toBe("Docker");
    expect(moved.get("/h/g")).toBe("GnuPG");
    expect(moved.get("/x/gh/hosts.yml")).toBe("GitHub CLI");
    // The default stays hidden too: a tool may be run without the variable.
    expect(moved.get("/h/.docker/config.json")).toBe("Docker");
  });

  it("a value that holds ${ is a path like any other (never expanded again), not a spelling refused: its store is hidden", () => {
    const m = at({ DOCKER_CONFIG: "/d/${HOME}" });
    expect(m.get("/d/${HOME}/config.json")).toBe("Docker");
    expect(expandValue("${A}/x", { A: "/a${B}" }, "/h")).toEqual({ ok: true, value: "/a${B}/x" });
    expect(expandValue("${A/x", {}, "/h").ok).toBe(false);
  });

  it("KUBECONFIG's list comes after every store's own paths: the first store to name a path keeps its description", () => {
    const m = at({ KUBECONFIG: "/h/.docker/config.json::kc" });
    expect(m.get("/h/.docker/config.json")).toBe("Docker");
    expect(m.get("/h/kc")).toBe("Kubernetes");
  });
});
