// The browsers' processes as Linux shows them in /proc: which descend from this one, how much CPU each
// spends, whether one lives. The Firefox and WebKit drivers find a window's content process with them (the
// process that spends CPU while that window busy-loops) so that the bench and the tests can kill it (SIGKILL),
// as a crash would, where the driver has no command that crashes a page.
import fs from 'node:fs';

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** The processes descended from `root` (default: this one), as `{ pid, command }`. */
export function descendants(root = process.pid) {
  const children = new Map();
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = readStat(entry);
    if (!stat) continue;
    if (!children.has(stat.ppid)) children.set(stat.ppid, []);
    children.get(stat.ppid).push(Number(entry));
  }
  const found = [];
  const visit = (pid) => {
    for (const child of children.get(pid) ?? []) {
      let command = '';
      try {
        command = fs.readFileSync(`/proc/${child}/cmdline`, 'utf8').replaceAll('\0', ' ');
      } catch {
        continue;
      }
      found.push({ pid: child, command });
      visit(child);
    }
  };
  visit(root);
  return found;
}

/** `/proc/<pid>/stat`'s state, parent and CPU time (user + system, in clock ticks), or null once the process is gone. */
function readStat(pid) {
  try {
    const text = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
    return { state: fields[0], ppid: Number(fields[1]), ticks: Number(fields[11]) + Number(fields[12]) };
  } catch {
    return null;
  }
}

/**
 * Of `processes`, the one that used the most CPU over `ms` (a window in a busy loop), with every process's
 * CPU ticks in that time so a caller can check the winner stands out.
 */
async function busiest(processes, ms = 500) {
  const before = new Map(processes.map((p) => [p.pid, readStat(p.pid)?.ticks ?? 0]));
  await sleep(ms);
  const deltas = processes.map((p) => ({ ...p, ticks: (readStat(p.pid)?.ticks ?? 0) - before.get(p.pid) }));
  deltas.sort((a, b) => b.ticks - a.ticks);
  return { busiest: deltas[0], deltas };
}

/** Whether process `pid` exists and is not a zombie (dead, not yet reaped by its parent). */
export const isAlive = (pid) => {
  const stat = readStat(pid);
  return stat !== null && stat.state !== 'Z';
};

/**
 * The pid of the process among `processes()` that spins while a window does: `spinSoon()` must make the
 * window busy-loop for at least 900 ms, starting within 100 ms. Throws unless one process stands out (at
 * least 8 ticks, and over 3 times any other's), so a caller never kills a process it did not single out.
 */
export async function spinningProcess(spinSoon, processes) {
  await spinSoon();
  await sleep(300);
  const { busiest: spinning, deltas } = await busiest(processes());
  const others = deltas.slice(1).reduce((max, p) => Math.max(max, p.ticks), 0);
  if (!(spinning?.ticks >= 8 && spinning.ticks > 3 * others)) {
    throw new Error(`no one process spins: ${JSON.stringify(deltas.map((p) => [p.pid, p.ticks]))}`);
  }
  return spinning.pid;
}

/** Run in a page: busy-loops for `ms` from 100 ms on. Self-contained, so any page can run it. */
function busyLoopSoon(ms) {
  setTimeout(() => {
    const end = Date.now() + ms;
    while (Date.now() < end);
  }, 100);
  return true;
}

/**
 * The pid of a tab's process among `processes()`, found by making the tab busy-loop for 0.9 s
 * (`evaluate(fn, arg)` runs a function in the tab, as a driver's tab does); resolves once the loop has ended.
 */
export async function tabProcess(evaluate, processes) {
  const spinMs = 900;
  const started = performance.now();
  const pid = await spinningProcess(() => evaluate(busyLoopSoon, spinMs), processes);
  await sleep(Math.max(0, started + 100 + spinMs + 50 - performance.now()));
  return pid;
}
