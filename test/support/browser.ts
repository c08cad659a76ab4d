import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type BrowserContext, chromium } from "playwright-core";

/**
 * Debian's chromium (installed by .ci/run), driven by playwright-core, which
 * never downloads a browser: headless, a fresh profile per launch, and
 * nothing that phones home (no background networking, component updates,
 * sync or QUIC). The profile is the context's user data dir, the one way
 * playwright takes --user-data-dir.
 */
export const CHROMIUM = "/usr/bin/chromium";

export async function launchChromium(extraArgs: string[] = []): Promise<{ context: BrowserContext; close(): Promise<void> }> {
  const profile = mkdtempSync(join(tmpdir(), "vak-chromium-"));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync", ...extraArgs],
    viewport: { width: 1280, height: 900 },
  });
  return {
    context,
    close: async () => {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}
