/** The fixed port of the relay on a sandbox's own loopback. */
export const RELAY_PORT = 3128;

/**
 * The environment that points clients at the egress proxy: the standard
 * variables in both cases (curl reads only the lower-case http_proxy), and the
 * spellings npm, yarn, pip and global-agent read. There is no NO_PROXY: inside
 * the sandbox nothing listens on loopback but the relay, so "127.0.0.1:8080"
 * in a grant means the host's loopback, reached through the gate like any
 * other destination.
 */
export function proxyEnv(port: number = RELAY_PORT): Record<string, string> {
  const url = `http://127.0.0.1:${port}`;
  return {
    HTTP_PROXY: url, HTTPS_PROXY: url, ALL_PROXY: url, http_proxy: url, https_proxy: url, all_proxy: url,
    npm_config_proxy: url, npm_config_https_proxy: url, YARN_HTTP_PROXY: url, YARN_HTTPS_PROXY: url,
    PIP_PROXY: url, GLOBAL_AGENT_HTTP_PROXY: url,
  };
}
