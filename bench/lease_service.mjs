// `npm run bench:leases` (also the end of `npm run bench`): the lease service's throughput and latency,
// and its memory per open change stream. Not a test: it prints figures and checks nothing against them.
//
// For SQLite (a temporary file) and PostgreSQL (a throwaway cluster), 64 clients cycle tryLock +
// releaseLock, each on its own key, first straight through the service's store (the same transactions
// and statements, without HTTP, JSON or tokens: the database's ceiling), then through one service
// instance over HTTP. Target: the service reaches at least half the store's cycles/s. Then 10,000 change
// streams are opened on a SQLite instance, and its resident memory is read before and after.
//
// Each pair of runs is repeated (--repeat, default 3), alternating store and service, and the table shows
// the medians: the machine is shared, and one run can land in another program's busy second.
//
// Last, the soak (bench/lease_soak.mjs): 64 users for --soak-seconds (default 60) with and without abuse
// (slow-header connections, abandoned requests), on an instance holding 100,000 leases. --only=soak runs
// it alone.
//
//   node bench/lease_service.mjs [--clients=64] [--seconds=5] [--repeat=3] [--streams=10000]
//                                [--soak-seconds=60] [--only=soak] [--out=FILE]
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFileSync, spawnSync } from 'node:child_process';
import { repoRoot } from '../tests/e2e/server.mjs';
import { startLeaseService, mintToken, newSecret, temporarySqlite } from '../tests/e2e/lease_service.mjs';
import { startPostgres } from '../tests/e2e/postgres_cluster.mjs';
import { soak } from './lease_soak.mjs';

const option = (name, fallback) => {
  const arg = process.argv.find((a) => a.startsWith(`--${name}=`));
  return arg ? arg.slice(name.length + 3) : fallback;
};
const clients = Number(option('clients', 64));
const seconds = Number(option('seconds', 5));
const streamCount = Number(option('streams', 10_000));
const repeat = Number(option('repeat', 3));
const soakSeconds = Number(option('soak-seconds', 60));
const only = option('only', 'all');

const log = (line) => console.error(`bench:leases: ${line}`);
log('cargo build --profile server -p weblocks-lease-server --bin weblocks-lease-server --example lease_bench');
const build = spawnSync('cargo', ['build', '--profile', 'server', '-p', 'weblocks-lease-server', '--bin', 'weblocks-lease-server', '--example', 'lease_bench'], {
  cwd: repoRoot,
  stdio: 'inherit',
});
if (build.status !== 0) process.exit(1);
const binary = path.join(repoRoot, 'target', 'server', 'weblocks-lease-server');
const bench = path.join(repoRoot, 'target', 'server', 'examples', 'lease_bench');
const run = (args) => JSON.parse(execFileSync(bench, [...args, `--clients=${clients}`, `--seconds=${seconds}`], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] }));

const secret = newSecret();
const token = mintToken(secret, { sub: 'bench', name: 'bench' });
// A log line per request would be the service's own bottleneck; the start-up line is still logged.
const quiet = { RUST_LOG: 'warn,weblocks_lease_server::server=info' };

/**
 * `repeat` rounds of: each store variant alone, then the service, each on a fresh database. Returns the
 * medians per variant and for the service, and the service ÷ store ratios of each round.
 */
async function compare(name, makeFresh, variants) {
  const rounds = [];
  for (let r = 1; r <= repeat; r++) {
    const round = { stores: {} };
    for (const { label, args } of variants) {
      log(`${name} ${r}/${repeat}: ${label}`);
      round.stores[label] = run(['store', `--database=${await makeFresh()}`, ...args]);
    }
    log(`${name} ${r}/${repeat}: the service`);
    const service = await startLeaseService({ database: await makeFresh(), secret, binary, env: quiet });
    try {
      round.service = run(['service', `--url=${service.url}`, `--token=${token}`, `--pid=${service.pid}`]);
    } finally {
      await service.stop();
    }
    rounds.push(round);
  }
  const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
  const summary = (pick) =>
    Object.fromEntries(['cyclesPerSecond', 'p50Ms', 'p99Ms', 'selfCpuUs', 'otherCpuUs'].map((k) => [k, median(rounds.map((round) => pick(round)[k] ?? 0))]));
  return {
    database: name,
    stores: variants.map(({ label }) => ({
      label,
      ...summary((round) => round.stores[label]),
      ratios: rounds.map((round) => round.service.cyclesPerSecond / round.stores[label].cyclesPerSecond),
    })),
    service: summary((round) => round.service),
    rounds,
  };
}

const results = {
  date: new Date().toISOString(),
  commit: execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: repoRoot, encoding: 'utf8' }).trim(),
  cpus: os.cpus().length,
  loadAverageAtStart: os.loadavg(),
  clients,
  seconds,
  repeat,
  runs: [],
};

const sqliteFiles = [];
const freshSqlite = () => {
  const db = temporarySqlite();
  sqliteFiles.push(db);
  return db.url;
};
const cluster = only === 'soak' ? null : await startPostgres();
try {
  if (only === 'soak') throw Object.assign(new Error('soak only'), { skip: true });
  results.runs.push(
    await compare('SQLite', freshSqlite, [
      { label: 'the database, one transaction per operation', args: ['--group=1'] },
      { label: "the service's store (grouped commits), no HTTP", args: [] },
    ]),
  );
  // Each PostgreSQL run gets a database of its own.
  let databases = 0;
  const freshPostgres = () => {
    const name = `bench_${++databases}`;
    cluster.psql(`CREATE DATABASE ${name}`);
    return cluster.url.replace(/\/postgres$/, `/${name}`);
  };
  results.runs.push(await compare('PostgreSQL', freshPostgres, [{ label: "the service's store, no HTTP", args: [] }]));

  log(`${streamCount} change streams on one SQLite instance`);
  const room = ['--max-streams', String(streamCount + 100), '--max-connections', String(streamCount + 200)];
  const service = await startLeaseService({ database: freshSqlite(), secret, binary, env: quiet, args: room });
  try {
    results.streams = JSON.parse(
      execFileSync(bench, ['streams', `--url=${service.url}`, `--token=${token}`, `--pid=${service.pid}`, `--count=${streamCount}`], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] }),
    );
  } finally {
    await service.stop();
  }
} catch (e) {
  if (!e.skip) throw e;
} finally {
  cluster?.stop();
  for (const db of sqliteFiles) db.remove();
}
log(`soak: ${clients} users for ${soakSeconds} s without abuse, then with`);
results.soak = await soak({ binary, secret, env: quiet, seconds: soakSeconds, users: clients, log });
results.loadAverageAtEnd = os.loadavg();

const number = (n, digits = 0) => n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });
if (results.runs.length) console.log(
  `\n## Lease service, ${clients} clients, tryLock + releaseLock cycles, median of ${repeat} (${results.date.slice(0, 10)}, commit ${results.commit}, ${results.cpus} CPUs)\n`,
);
if (results.runs.length) console.log('| database | through | cycles/s | p50 | p99 | CPU per cycle |');
if (results.runs.length) console.log('| --- | --- | ---: | ---: | ---: | ---: |');
const row = (database, label, m, cpu) => `| ${database} | ${label} | ${number(m.cyclesPerSecond)} | ${number(m.p50Ms, 1)} ms | ${number(m.p99Ms, 1)} ms | ${cpu} |`;
for (const { database, stores, service } of results.runs) {
  for (const store of stores) console.log(row(database, store.label, store, `${number(store.selfCpuUs)} µs`));
  console.log(row(database, '**the service** (HTTP, JSON, JWT)', service, `${number(service.otherCpuUs)} µs + the clients' ${number(service.selfCpuUs)} µs`));
}
if (results.runs.length) console.log('\nThe service ÷ each ceiling (target ≥ 0.5), median, and per round:\n');
for (const { database, stores, service } of results.runs) {
  for (const store of stores) {
    const ratio = service.cyclesPerSecond / store.cyclesPerSecond;
    console.log(`- ${database}, ${store.label}: ${number(ratio, 2)} ${ratio >= 0.5 ? '✓' : '✗'} (${store.ratios.map((r) => number(r, 2)).join(', ')})`);
  }
}
const s = results.streams;
if (s) {
  console.log(
    `\nChange streams: ${number(s.streams)} open on one instance (one key each), opened in ${number(s.openedInSeconds, 1)} s; ` +
      `resident memory ${number(s.residentBeforeBytes / 2 ** 20, 1)} → ${number(s.residentAfterBytes / 2 ** 20, 1)} MiB: ${number(s.bytesPerStream / 1024, 1)} KiB per stream.`,
  );
}
const k = results.soak;
console.log(`\n## Soak: ${k.users} users for ${k.seconds} s on SQLite holding 100,000 leases, without then with abuse\n`);
console.log('| phase | cycles | errors | p50 | p99 | abuse |');
console.log('| --- | ---: | ---: | ---: | ---: | --- |');
for (const p of k.phases) {
  const abuse = p.slowConnectionsOpened ? `${number(p.slowConnectionsOpened)} slow-header connections opened, ${number(p.requestsAbandoned)} requests abandoned` : 'none';
  console.log(`| ${p.name} | ${number(p.cycles)} | ${p.errors} | ${number(p.p50Ms, 1)} ms | ${number(p.p99Ms, 1)} ms | ${abuse} |`);
}
const [calm, abused] = k.phases;
console.log(`\np99 with abuse ÷ without: ${number(abused.p99Ms / calm.p99Ms, 2)} (target ≤ 2)\n`);
console.log('| | at start | users, before abuse | during abuse | 15 s after |');
console.log('| --- | ---: | ---: | ---: | ---: |');
const f = k.footprint;
const mib = (bytes) => `${number(bytes / 2 ** 20, 1)} MiB`;
console.log(`| resident memory | ${mib(f.before.rssBytes)} | ${mib(f.beforeAbuse.rssBytes)} | ${mib(f.during.rssBytes)} | ${mib(f.after.rssBytes)} |`);
console.log(`| open descriptors | ${f.before.descriptors} | ${f.beforeAbuse.descriptors} | ${f.during.descriptors} | ${f.after.descriptors} |`);
const l = k.list;
console.log(
  `\nlist at 100,000 leases (median of 20): all types, limit 1,000: ${number(l.all1000.p50Ms, 1)} ms; one type, limit 10: ${number(l.ofType10.p50Ms, 1)} ms; ` +
    `a type with no lease: ${number(l.emptyType.p50Ms, 1)} ms; a type stream's first state: ${number(l.streamFirstState.p50Ms, 1)} ms.`,
);
console.log(`Load average ${results.loadAverageAtStart.map((l) => l.toFixed(1)).join(' ')} at start, ${results.loadAverageAtEnd.map((l) => l.toFixed(1)).join(' ')} at end.`);
const out = option('out', path.join(repoRoot, 'bench-results', `lease-service-${results.date.replace(/[:.]/g, '-')}.json`));
fs.mkdirSync(path.dirname(out), { recursive: true });
fs.writeFileSync(out, JSON.stringify(results, null, 1));
console.log(`\nJSON: ${path.relative(process.cwd(), out)}`);
