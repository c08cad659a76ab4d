/** Exit statuses of the CLI contract (see ARCHITECTURE.md). */
export const EXIT_TIMEOUT = 124;
/** Vak refused, or could not set up the sandbox; stderr says which and why. */
export const EXIT_REFUSED = 125;
