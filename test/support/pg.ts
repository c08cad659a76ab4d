import { randomBytes } from "node:crypto";
import pg from "pg";
import { inject } from "vitest";
import { initDb } from "../../src/journal/pg-admin.js";
import { pgTarget } from "../../src/journal/pg-connect.js";

/**
 * A database of its own for one test file, on the run's PostgreSQL (see
 * global-setup.ts): the journal's schema made by init-db, a writer role and a
 * login role holding only it. Without a server this throws, so the test fails.
 */
export interface TestDatabase {
  name: string;
  /** The superuser, on this database. */
  adminUrl: string;
  /** The login role hosts use (SELECT and INSERT on the journal, nothing else), over the unix socket. */
  writerUrl: string;
  login: string;
  /** The socket's directory. */
  socketDir: string;
  port: number;
  /** Runs SQL as the superuser, on this database. */
  admin<T extends pg.QueryResultRow = Record<string, unknown>>(sql: string, params?: unknown[]): Promise<T[]>;
  drop(): Promise<void>;
}

export function pgAdminUrl(): string {
  const url = inject("pgAdmin");
  if (!url) throw new Error(`no PostgreSQL for this test: ${inject("pgProblem") || "VAK_TEST_PG is not set"}`);
  return url;
}

function withDatabase(url: string, db: string): string {
  const u = new URL(url);
  u.pathname = `/${db}`;
  return u.toString();
}

function withUser(url: string, user: string): string {
  const u = new URL(url);
  u.username = user;
  return u.toString();
}

export async function testDatabase(opts: { init?: boolean } = {}): Promise<TestDatabase> {
  const root = pgAdminUrl();
  const id = randomBytes(5).toString("hex");
  const name = `vak_t_${id}`;
  const login = `vak_host_${id}`;
  const rootClient = new pg.Client(pgTarget({ url: root, what: "VAK_TEST_PG" }).config);
  await rootClient.connect();
  try {
    await rootClient.query(`CREATE DATABASE ${name} ENCODING 'UTF8' TEMPLATE template0`);
    await rootClient.query(`CREATE ROLE ${login} LOGIN`);
  } finally {
    await rootClient.end();
  }
  const adminUrl = withDatabase(root, name);
  if (opts.init !== false) await initDb(pgTarget({ url: adminUrl, what: "test" }), { role: `vak_writer_${id}`, grantTo: [login] });
  const u = new URL(root);
  const admin = async <T extends pg.QueryResultRow>(sql: string, params?: unknown[]) => {
    const c = new pg.Client(pgTarget({ url: adminUrl, what: "test" }).config);
    await c.connect();
    try {
      return (await c.query<T>(sql, params)).rows;
    } finally {
      await c.end();
    }
  };
  return {
    name, adminUrl, writerUrl: withUser(adminUrl, login), login,
    socketDir: u.searchParams.get("host") ?? "", port: Number(u.port || 5432),
    admin,
    drop: async () => {
      const c = new pg.Client(pgTarget({ url: root, what: "VAK_TEST_PG" }).config);
      await c.connect();
      try {
        await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
        await c.query(`DROP ROLE IF EXISTS ${login}`);
        await c.query(`DROP ROLE IF EXISTS vak_writer_${id}`);
      } finally {
        await c.end();
      }
    },
  };
}
