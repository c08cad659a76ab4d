/**
 * The client's requests: same origin only, the session cookie (HttpOnly: this
 * code never sees it), JSON bodies. Every answer is data to show as text.
 */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

async function call<T>(method: "GET" | "POST", path: string, body?: unknown): Promise<T> {
  const res = await fetch(`/api/${path}`, {
    method,
    credentials: "same-origin",
    cache: "no-store",
    headers: body === undefined ? {} : { "Content-Type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (res.status === 204) return undefined as T;
  let data: unknown;
  try {
    data = await res.json();
  } catch {
    throw new ApiError(res.status, "bad-answer", `the server answered ${res.status} without JSON`);
  }
  if (!res.ok) {
    const e = (data as { error?: { code?: unknown; message?: unknown } }).error;
    throw new ApiError(res.status, String(e?.code ?? "error"), String(e?.message ?? `the server answered ${res.status}`));
  }
  return data as T;
}

export const get = <T>(path: string) => call<T>("GET", path);
export const post = <T>(path: string, body: unknown = {}) => call<T>("POST", path, body);
export const sessionPath = (id: string, rest = "") => `sessions/${encodeURIComponent(id)}${rest}`;
