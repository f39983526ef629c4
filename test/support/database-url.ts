/** The URL of the database `name` on the server `serverUrl` reaches, the rest of it (user, host, `?host=`) kept. */
export function urlOfDatabase(serverUrl: string, name: string): string {
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return url.toString();
}
