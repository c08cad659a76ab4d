// Runs inside a sandbox: plays conversations of raw bytes against the egress gate's proxy (HTTP_PROXY,
// 127.0.0.1:3128) and prints, as one JSON line, what each connection got back and how it ended. A
// conversation is pieces of bytes, each written after its pause (so that each arrives in its own read);
// pieces the gate closed the connection before are not written. Used by test/attacks/chunked-smuggling.test.ts.
//
// node proxy-conversations.mjs PLAN.json
// PLAN: { conversations: [{ pieces: [{ b64, gapMs }], waitMs }] }
// out:  [{ got: base64, end: "end" | "reset" | "timeout" | "error: …", written: n }]
import { readFileSync } from "node:fs";
import { connect } from "node:net";

const plan = JSON.parse(readFileSync(process.argv[2], "utf8"));
const proxy = new URL(process.env.HTTP_PROXY ?? "http://127.0.0.1:3128");
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function play(c) {
  return new Promise((resolve) => {
    const s = connect({ host: proxy.hostname, port: Number(proxy.port), allowHalfOpen: true });
    s.setNoDelay(true);
    const got = [];
    let written = 0;
    let end;
    let timer;
    const finish = (how) => {
      if (end !== undefined) return;
      end = how;
      clearTimeout(timer);
      s.destroy();
      resolve({ got: Buffer.concat(got).toString("base64"), end, written });
    };
    s.on("data", (d) => got.push(d));
    s.on("end", () => finish("end"));
    s.on("error", (e) => finish(e.code === "ECONNRESET" ? "reset" : `error: ${e.code ?? e.message}`));
    s.on("close", () => finish("end"));
    s.on("connect", async () => {
      for (const p of c.pieces) {
        await sleep(p.gapMs);
        if (end !== undefined || s.destroyed) return;
        s.write(Buffer.from(p.b64, "base64"));
        written += 1;
      }
      timer = setTimeout(() => finish("timeout"), c.waitMs);
    });
  });
}

const out = await Promise.all(plan.conversations.map(play));
process.stdout.write(JSON.stringify(out) + "\n");
