import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { servedTree, testInternet, type TestInternet } from "../support/netns.js";
import { testCa, type TestCa } from "../support/tls.js";

// The clients a coding agent runs, inside `vak exec`, over HTTPS that the gate
// terminates (a read: grant), with no flag of their own: each finds the run's
// CA through the variables Vak sets (tls-trust.ts). The server is in a test
// network namespace, signed by the test's CA, given to vak with --ca-file.
describe("clients trust the run's CA without flags", () => {
  let net: TestInternet;
  let ca: TestCa;

  beforeAll(async () => {
    ca = await testCa();
    net = await testInternet({ "api.test": "11.0.0.2" }, [80], [], [{ port: 443, ...(await ca.issue(["api.test"])) }]);
    servedTree(net.dir);
    writeFileSync(join(net.dir, "ws", "Fetch.java"), `import java.net.*; import java.io.*;
public class Fetch { public static void main(String[] a) throws Exception {
  HttpURLConnection c = (HttpURLConnection) new URL(a[0]).openConnection();
  System.out.println("java " + c.getResponseCode() + " " + new String(c.getInputStream().readAllBytes()).trim()); } }`);
  }, 60_000);
  afterAll(() => net?.close());

  const run = (script: string) => net.vak(["exec", "--ca-file", ca.file, "--allow-net", "read:api.test", "--", "/bin/sh", "-c", script]);

  it.each([
    ["curl", "curl -sS https://api.test/echo/curl", "echo GET /echo/curl"],
    ["git", "git ls-remote https://api.test/repo.git", "refs/heads/main"],
    ["Python urllib", `python3 -c "import urllib.request; print(urllib.request.urlopen('https://api.test/echo/urllib').read().decode())"`, "echo GET /echo/urllib"],
    ["Python requests", `python3 -c "import requests; print(requests.get('https://api.test/echo/requests').text)"`, "echo GET /echo/requests"],
    ["Python httpx", `python3 -c "import httpx; print(httpx.get('https://api.test/echo/httpx').text)"`, "echo GET /echo/httpx"],
    ["Node fetch", `node -e "fetch('https://api.test/echo/fetch').then(r => r.text()).then(t => console.log(t), e => console.log('failed', e.cause?.message ?? e.message))"`, "echo GET /echo/fetch"],
    ["npm", "npm ping --registry https://api.test/ 2>&1", "PONG"],
    ["pip", "pip download --no-deps --no-cache-dir -d /tmp/p --index-url https://api.test/simple/ vak-nothing 2>&1; true", "vak-nothing"],
    ["Java", "java Fetch.java https://api.test/echo/java 2>&1", "java 200 echo GET /echo/java"],
  ])("%s", async (name, script, expected) => {
    const r = await run(script);
    expect(r.stdout + r.stderr).toContain(expected);
    if (name === "pip") expect(net.log().join("\n")).toContain("GET /simple/vak-nothing/");
    expect(r.stdout + r.stderr).not.toMatch(/certificate verify failed|self.signed|unable to get local issuer|PKIX/i);
  }, 60_000);
});
