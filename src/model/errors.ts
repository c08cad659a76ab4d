import { ModelError } from "./types.js";

/** The error classes both providers' SDKs export (they are generated from one template). */
export interface SdkErrors {
  APIUserAbortError: abstract new (...a: never[]) => Error;
  AuthenticationError: abstract new (...a: never[]) => Error;
  PermissionDeniedError: abstract new (...a: never[]) => Error;
  RateLimitError: abstract new (...a: never[]) => Error;
  NotFoundError: abstract new (...a: never[]) => Error;
  APIConnectionError: abstract new (...a: never[]) => Error;
  BadRequestError: abstract new (...a: never[]) => Error;
  APIError: abstract new (...a: never[]) => Error;
}

/** What a server said, bounded: its error text is its own choice, of any length. */
function said(e: unknown): string {
  const m = String((e as Error)?.message ?? e);
  return m.length > 1000 ? `${m.slice(0, 1000)}… (+${m.length - 1000} characters)` : m;
}

/** A provider's failure, said plainly: which provider, what went wrong, what to do. */
export function describeSdkError(sdk: SdkErrors, e: unknown, cfg: { provider: string; baseURL: string; model: string }): ModelError {
  const where = `${cfg.provider} (${cfg.baseURL})`;
  const status = (e as { status?: number }).status;
  if (e instanceof sdk.APIUserAbortError) return new ModelError("cancelled", `${where}: the call was cancelled`);
  if (e instanceof sdk.AuthenticationError || e instanceof sdk.PermissionDeniedError)
    return new ModelError("auth", `${where} refused the API key (${status}); set the key in the environment variable named by [providers.${cfg.provider}] api_key_env in ~/.config/vak/config.toml`);
  if (e instanceof sdk.RateLimitError) return new ModelError("rate-limit", `${where} is rate-limiting (429) and retries did not help; wait and try again`);
  if (e instanceof sdk.NotFoundError) return new ModelError("not-found", `${where} answered 404: check the model name (${cfg.model}) and that base_url ends where the API begins (often /v1)`);
  if (e instanceof sdk.APIConnectionError) return new ModelError("connection", `cannot reach ${where}: ${said(e)}; check base_url`);
  if (e instanceof sdk.BadRequestError) return new ModelError("bad-request", `${where} refused the request (400): ${said(e)}`);
  if (e instanceof sdk.APIError) return new ModelError("server", `${where} failed (${status ?? "no status"}): ${said(e)}`);
  return new ModelError("server", `${where}: ${said(e)}`);
}
