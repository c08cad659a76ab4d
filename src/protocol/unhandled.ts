/**
 * For the default of a switch that handles every case: a new case fails to
 * compile there (its value is not `never`); at run time it throws. Imports
 * nothing, so that modules on `vak exec`'s start-up path can use it without
 * loading zod.
 */
export function unhandled(value: never, what: string): never {
  throw new Error(`unhandled ${what}: ${JSON.stringify(value)}`);
}
