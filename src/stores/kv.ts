import { chmodSync, existsSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import Database from "better-sqlite3";
import { VakError } from "../policy/errors.js";
import { vakDirs } from "../policy/state.js";

/**
 * Stores: a broker-owned key-value capability per workload and store name.
 * Each workload has its own SQLite file in Vak's state directory (which no
 * sandbox can reach); a component reaches a store only through the broker,
 * and only one its grant names.
 */
export const STORE_NAME = /^[a-z][a-z0-9_-]{0,63}$/;
export const MAX_KEY_BYTES = 512;
export const MAX_VALUE_BYTES = 1024 * 1024;
export const MAX_STORE_BYTES = 64 * 1024 * 1024;

export class KvStores {
  private readonly db: Database.Database;

  /** Opens (creating, 0600) the stores of one workload. */
  constructor(readonly workloadId: string, dir: string = join(vakDirs().state, "stores")) {
    if (!/^[A-Za-z0-9_-]{1,128}$/.test(workloadId)) throw new VakError("internal", `bad workload id ${workloadId}`);
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const path = join(dir, `${workloadId}.db`);
    const fresh = !existsSync(path);
    this.db = new Database(path);
    if (fresh) chmodSync(path, 0o600);
    this.db.pragma("journal_mode = WAL");
    this.db.exec("CREATE TABLE IF NOT EXISTS kv (store TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, updated TEXT NOT NULL, PRIMARY KEY (store, key))");
  }

  get(store: string, key: string): string | undefined {
    const row = this.db.prepare("SELECT value FROM kv WHERE store = ? AND key = ?").get(store, key) as { value: string } | undefined;
    return row?.value;
  }

  put(store: string, key: string, value: string): void {
    if (Buffer.byteLength(key) > MAX_KEY_BYTES) throw new VakError("bad-input", `the key is longer than ${MAX_KEY_BYTES} bytes`);
    if (Buffer.byteLength(value) > MAX_VALUE_BYTES) throw new VakError("bad-input", `the value is larger than ${MAX_VALUE_BYTES} bytes`);
    const put = this.db.transaction(() => {
      const used = (this.db.prepare("SELECT COALESCE(SUM(LENGTH(CAST(key AS BLOB)) + LENGTH(CAST(value AS BLOB))), 0) AS n FROM kv WHERE store = ? AND key != ?").get(store, key) as { n: number }).n;
      if (used + Buffer.byteLength(key) + Buffer.byteLength(value) > MAX_STORE_BYTES) throw new VakError("bad-input", `the store ${store} would exceed ${MAX_STORE_BYTES} bytes`);
      this.db.prepare("INSERT INTO kv (store, key, value, updated) VALUES (?,?,?,?) ON CONFLICT(store, key) DO UPDATE SET value = excluded.value, updated = excluded.updated").run(store, key, value, new Date().toISOString());
    });
    put();
  }

  list(store: string, prefix = "", limit = 1000): string[] {
    const rows = this.db.prepare("SELECT key FROM kv WHERE store = ? AND substr(key, 1, ?) = ? ORDER BY key LIMIT ?").all(store, prefix.length, prefix, limit) as { key: string }[];
    return rows.map((r) => r.key);
  }

  delete(store: string, key: string): boolean {
    return this.db.prepare("DELETE FROM kv WHERE store = ? AND key = ?").run(store, key).changes > 0;
  }

  close(): void {
    this.db.close();
  }
}
