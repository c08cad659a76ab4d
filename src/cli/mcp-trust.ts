export async function mcpTrust(_name: string | undefined, _opts: { yes?: boolean; json?: boolean }): Promise<number> {
  return 0;
}
