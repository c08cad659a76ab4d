import { useState } from "preact/hooks";
import { ApiError, post } from "./api.js";

/** Not logged in: the login URL `vak serve` printed does it in one click; the token also works here. */
export function Login({ onIn, reason }: { onIn: () => void; reason: string }) {
  const [token, setToken] = useState("");
  const [error, setError] = useState<string | undefined>();
  const submit = async (e: Event) => {
    e.preventDefault();
    setError(undefined);
    try {
      await post("login", { token: token.trim() });
      setToken("");
      onIn();
    } catch (err) {
      setError(err instanceof ApiError ? err.message : String(err));
    }
  };
  return (
    <main class="login">
      <h1>vak</h1>
      <p>{reason}</p>
      <p>Open the login URL that <code>vak serve</code> printed in its terminal, or paste its token:</p>
      <form onSubmit={submit}>
        <label for="token">Token</label>
        <input id="token" type="password" autocomplete="current-password" value={token} onInput={(e) => setToken((e.target as HTMLInputElement).value)} required />
        <button type="submit">Log in</button>
      </form>
      {error ? <p role="alert" class="error">{error}</p> : null}
    </main>
  );
}
