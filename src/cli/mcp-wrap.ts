export function mcpWrap(_opts: { config: string; dryRun?: boolean }): number {
  return 0;
}
export function mcpUnwrap(_opts: { config: string }): number {
  return 0;
}
