// Loaded into sandboxed Node processes with a network grant (NODE_OPTIONS
// --require). Node 20's built-in fetch ignores HTTP_PROXY; inside the sandbox a
// direct connection has nowhere to go, so fetch is sent through the egress
// proxy instead. undici is a separate chunk, loaded on the first fetch only.
const proxy = process.env.HTTPS_PROXY ?? process.env.HTTP_PROXY;
if (proxy && typeof globalThis.fetch === "function") {
  let proxied: Promise<typeof globalThis.fetch> | undefined;
  const load = async (url: string): Promise<typeof globalThis.fetch> => {
    const undici = await import("undici");
    // http:// goes to the gate as a plain proxy request (so read: grants and secret headers apply); https:// is tunnelled.
    const dispatcher = new undici.ProxyAgent({ uri: url, proxyTunnel: false });
    return ((input: unknown, init?: object) => undici.fetch(input as never, { dispatcher, ...init } as never)) as unknown as typeof globalThis.fetch;
  };
  globalThis.fetch = async function fetch(input, init) {
    proxied ??= load(proxy);
    return (await proxied)(input, init);
  };
}
