/** Why the embedded Postgres cannot run, in one line that says what to do; the CLI prints it without a stack. */
export class EmbeddedPostgresError extends Error {
  override name = 'EmbeddedPostgresError';
}

/** The database cannot be reached or used; the CLI prints the message without a stack. */
export class DatabaseUnavailableError extends Error {
  override name = 'DatabaseUnavailableError';
}
