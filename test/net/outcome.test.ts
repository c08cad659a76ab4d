import { describe, expect, it } from "vitest";
import { outcomeOf } from "../../src/net/outcome.js";

const certError = (code: string, message: string) => Object.assign(new Error(message), { code });

describe("outcomeOf: a certificate that does not verify says what would help", () => {
  it.each([
    ["DEPTH_ZERO_SELF_SIGNED_CERT", "self-signed certificate", /trust that CA with --ca-file/],
    ["UNABLE_TO_GET_ISSUER_CERT_LOCALLY", "unable to get local issuer certificate", /trust that CA with --ca-file/],
    ["ERR_TLS_CERT_ALTNAME_INVALID", "Hostname/IP does not match certificate's altnames", /for other names: this is not the server asked for/],
    ["CERT_HAS_EXPIRED", "certificate has expired", /outside its validity period/],
  ])("%s", (code, message, hint) => {
    const text = outcomeOf(certError(code, message));
    expect(text).toContain(`the upstream's certificate does not verify (${code}: ${message})`);
    expect(text).toMatch(hint);
    // A CA file cannot fix a certificate for another name or out of date: the message must not send the user there.
    if (!/trust that CA/.test(hint.source)) expect(text).not.toContain("--ca-file");
  });
});
