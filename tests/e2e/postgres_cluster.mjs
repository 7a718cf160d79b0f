// A throwaway PostgreSQL cluster for the lease service's tests: Debian's `postgresql` (installed by
// scripts/setup.sh), initialised in a temporary directory and started on a free port by the test, as the
// `postgres` user when the tests run as root (PostgreSQL refuses to run as root). `stop()` shuts it
// down and removes the directory.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import { freePort } from '../../bench/lib/free_port.mjs';
import os from 'node:os';
import path from 'node:path';

/** The newest installed server's bin directory, e.g. /usr/lib/postgresql/15/bin. */
export function postgresBin() {
  const root = '/usr/lib/postgresql';
  const versions = fs.existsSync(root) ? fs.readdirSync(root).filter((v) => fs.existsSync(path.join(root, v, 'bin', 'initdb'))) : [];
  if (versions.length === 0) throw new Error('PostgreSQL is not installed (run scripts/setup.sh)');
  versions.sort((a, b) => Number(b) - Number(a));
  return path.join(root, versions[0], 'bin');
}

const asRoot = process.getuid?.() === 0;

/** Run a PostgreSQL tool as the `postgres` user when we are root, else as ourselves. */
function run(tool, args) {
  const command = path.join(postgresBin(), tool);
  const [file, argv] = asRoot ? ['runuser', ['-u', 'postgres', '--', command, ...args]] : [command, args];
  return execFileSync(file, argv, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

/** Start a cluster; resolves with `{ url, psql(sql), stop() }`. */
export async function startPostgres() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'weblocks-pg-'));
  if (asRoot) execFileSync('chown', ['postgres', dir]);
  const data = path.join(dir, 'data');
  const port = await freePort();
  try {
    run('initdb', ['-D', data, '-A', 'trust', '-U', 'postgres', '--no-sync']);
    run('pg_ctl', ['-D', data, '-o', `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c max_connections=200`, '-l', path.join(dir, 'log'), '-w', 'start']);
  } catch (e) {
    fs.rmSync(dir, { recursive: true, force: true });
    throw new Error(`PostgreSQL did not start: ${e.stderr ?? e.message}`);
  }
  const url = `postgres://postgres@127.0.0.1:${port}/postgres`;
  return {
    url,
    /** The rows of `sql` as JSON (through `json_agg`), read with psql. */
    psql: (sql) => execFileSync(path.join(postgresBin(), 'psql'), [url, '-At', '-c', sql], { encoding: 'utf8' }).trim(),
    stop: () => {
      try {
        run('pg_ctl', ['-D', data, '-m', 'fast', '-w', 'stop']);
      } finally {
        fs.rmSync(dir, { recursive: true, force: true });
      }
    },
  };
}

/** Both tables of the lease service's database, as JSON, read with psql. */
export function dumpPostgres(cluster) {
  const rows = (table) => JSON.parse(cluster.psql(`SELECT coalesce(json_agg(t ORDER BY t.type, t.id), '[]') FROM ${table} t`));
  return { locks: rows('locks'), fences: rows('lock_fences') };
}
