/** A setting the user must fix. Printed as one line (no stack) and the process exits with code 2. */
export class ConfigError extends Error {
  override name = 'ConfigError';
}
