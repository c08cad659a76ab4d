// A web server for egress tests, run inside a network namespace the test
// creates. Serves a directory (for git's dumb HTTP), echoes requests, and
// redirects on demand. Appends one line per request to the log file.
import { appendFileSync, readFileSync, statSync } from "node:fs";
import { createServer } from "node:http";
import { join, normalize } from "node:path";

const [host, ports, root, log] = process.argv.slice(2);
for (const port of ports.split(",").map(Number)) {
  createServer((req, res) => {
    let body = "";
    req.on("data", (d) => (body += d));
    req.on("end", () => {
      appendFileSync(log, `${port} ${req.method} ${req.url} host=${req.headers.host}\n`);
      if (req.url === "/redirect-meta") return res.writeHead(302, { location: "http://169.254.169.254/latest/meta-data/" }).end();
      if (req.url === "/redirect-loop") return res.writeHead(302, { location: "http://127.1:9/" }).end();
      if (req.url?.startsWith("/echo")) return res.writeHead(200).end(`echo ${req.method} ${req.url} host=${req.headers.host} body=${body}\n`);
      const path = normalize(join(root, decodeURIComponent(req.url.split("?")[0])));
      if (!path.startsWith(root)) return res.writeHead(403).end();
      try {
        if (statSync(path).isFile()) return res.writeHead(200).end(readFileSync(path));
      } catch {}
      res.writeHead(404).end("not found\n");
    });
  }).listen(port, host, () => process.stdout.write(`listening ${port}\n`));
}
