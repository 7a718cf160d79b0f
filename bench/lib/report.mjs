// Summaries of the runs (medians over repeats) and the markdown table: each figure, its ratio to native,
// its target (docs/BENCH.md) and whether weblocks meets it; safety checks as their own rows.
import { medianOf } from './single_context.mjs';

/** The 95th percentile of `values` (nearest rank: the largest of fewer than 20), or null if none. */
function p95Of(values) {
  const sorted = values.filter((v) => typeof v === 'number' && Number.isFinite(v)).sort((a, b) => a - b);
  return sorted.length === 0 ? null : sorted[Math.ceil(0.95 * sorted.length) - 1];
}

const statistics = { median: medianOf, p95: p95Of };

/**
 * Median (or `statistic`: 'p95') of `pick` over the runs that produced a number; or the first run's error,
 * or why the scenario was skipped (`run.skipped`: the browser cannot be driven so). `invalid(run)`, when
 * given, names why a run's figure means nothing (e.g. "overlaps: 12": a handoff time between tabs that
 * were inside the lock at once); such runs count as errors.
 */
export function summarise(runs, pick, invalid = () => null, statistic = 'median') {
  const values = [];
  let error = null;
  let skipped = null;
  for (const run of runs) {
    if (run.skipped) {
      skipped ??= run.skipped;
      continue;
    }
    const why = run.error ?? invalid(run);
    if (why) {
      error ??= why;
      continue;
    }
    let value;
    try {
      value = pick(run);
    } catch {
      value = null;
    }
    if (typeof value === 'number' && Number.isFinite(value)) values.push(value);
  }
  return { value: statistics[statistic](values), samples: values.length, error, skipped };
}

/** Worst (largest) value of a safety check over the runs, or null when no run produced it. */
export function worstCheck(runs, pick) {
  let worst = null;
  for (const run of runs) {
    if (run.error || run.skipped) continue;
    const value = pick(run);
    if (typeof value === 'number') worst = Math.max(worst ?? 0, value);
  }
  return worst;
}

export function formatNumber(value, digits) {
  if (value === null || value === undefined) return '–';
  if (digits !== undefined) return value.toLocaleString('en', { maximumFractionDigits: digits, minimumFractionDigits: digits });
  const abs = Math.abs(value);
  const fraction = abs >= 100 ? 0 : abs >= 10 ? 1 : abs >= 1 ? 2 : 3;
  return value.toLocaleString('en', { maximumFractionDigits: fraction, minimumFractionDigits: fraction });
}

function formatRatio(ratio) {
  return ratio >= 10 ? ratio.toFixed(0) : ratio >= 1 ? ratio.toFixed(1) : ratio.toFixed(2);
}

export function describeTarget(target) {
  if (!target) return '';
  if (target.ratio !== undefined) return target.ratio === 1 ? '≥ native' : `≥ ${target.ratio}× native`;
  if (target.ratioAtMost !== undefined) return `≤ ${target.ratioAtMost}× native`;
  if (target.atMost !== undefined) return `≤ ${target.atMost.toLocaleString('en')}${target.unit ?? ' ms'}`;
  if (target.overNativeAtMost !== undefined) return `≤ native + ${target.overNativeAtMost} ms`;
  return '';
}

/** Whether `value` (with native's `nativeValue`) meets `target`; undefined when it cannot be told. */
export function meetsTarget(target, value, nativeValue) {
  if (!target || value === null) return undefined;
  if (target.ratio !== undefined) return nativeValue ? value / nativeValue >= target.ratio : undefined;
  if (target.ratioAtMost !== undefined) return nativeValue ? value / nativeValue <= target.ratioAtMost : undefined;
  if (target.atMost !== undefined) return value <= target.atMost;
  if (target.overNativeAtMost !== undefined) return nativeValue !== null ? value - nativeValue <= target.overNativeAtMost : undefined;
  return undefined;
}

/**
 * The summary of one scenario for every variant: metrics (median, ratio to native, target met) and
 * checks (worst over the runs; must be 0).
 */
export function summariseScenario(scenario, runsByVariant, variants) {
  const native = runsByVariant.native ?? [];
  const metrics = scenario.metrics.map((metric) => {
    const nativeSummary = summarise(native, metric.pick, metric.invalid, metric.statistic);
    // `ratioToNative`: the ratio is to native's figure of another metric (that pick), native's column too.
    const against = metric.ratioToNative ? summarise(native, metric.ratioToNative).value : nativeSummary.value;
    const cells = {};
    for (const variant of variants) {
      const s = summarise(runsByVariant[variant.id] ?? [], metric.pick, metric.invalid, metric.statistic);
      // `plusNative`: the figure adds native's median of that pick; `notFor`: the variants it has no figure for.
      if (metric.plusNative) {
        const plus = summarise(native, metric.plusNative).value;
        s.value = plus === null || s.value === null ? null : s.value + plus;
      }
      if (metric.notFor?.includes(variant.id)) s.value = null;
      const rated = !metric.noRatio && (variant.id !== 'native' || metric.ratioToNative);
      const ratio = rated && s.value !== null && against ? s.value / against : null;
      const target = metric.target && (!metric.target.variants || metric.target.variants.includes(variant.id)) ? metric.target : null;
      const met = variant.id === 'native' ? undefined : meetsTarget(target, s.value, nativeSummary.value);
      cells[variant.id] = { ...s, ratio, met };
    }
    return { label: metric.label, better: metric.better, digits: metric.digits, target: metric.target ?? null, notFor: metric.notFor ?? [], cells };
  });
  const checks = (scenario.checks ?? []).map((check) => {
    const cells = {};
    for (const variant of variants) {
      const worst = worstCheck(runsByVariant[variant.id] ?? [], check.pick);
      cells[variant.id] = { worst, ok: worst === null ? undefined : worst === 0 };
    }
    return { label: check.label, cells };
  });
  return { number: scenario.number, key: scenario.key, title: scenario.title, crossTab: !!scenario.crossTab, metrics, checks };
}

function metricCell(cell, metric, isNative) {
  if (cell.value === null) {
    if (cell.skipped) return cell.skipped;
    if (!cell.error) return 'n/a';
    return `${cell.error.split('\n')[0].slice(0, 60)}${metric.target && !isNative ? ' ✗' : ''}`;
  }
  let text = formatNumber(cell.value, metric.digits);
  if (cell.ratio !== null) text += ` (${formatRatio(cell.ratio)}×)`;
  if (cell.met === true) text += ' ✓';
  if (cell.met === false) text += ' ✗';
  return text;
}

function checkCell(cell) {
  if (cell.worst === null) return 'n/a';
  if (cell.ok) return '0 ✓';
  return `${formatNumber(cell.worst, 0)} ✗`;
}

/** The markdown table of `summaries` (one per scenario) for `variants`. */
export function markdownTable(summaries, variants) {
  const arrow = (better) => (better === 'higher' ? ' ↑' : better === 'lower' ? ' ↓' : '');
  const lines = [
    `| # | scenario: metric | ${variants.map((v) => v.label).join(' | ')} | target |`,
    `| --- | --- | ${variants.map(() => '---:').join(' | ')} | --- |`,
  ];
  for (const s of summaries) {
    let first = true;
    const label = (text) => {
      const line = first ? `**${s.title}**: ${text}` : `↳ ${text}`;
      first = false;
      return line;
    };
    for (const metric of s.metrics) {
      const cells = variants.map((v) => metricCell(metric.cells[v.id], metric, v.id === 'native'));
      lines.push(`| ${s.number} | ${label(metric.label + arrow(metric.better))} | ${cells.join(' | ')} | ${describeTarget(metric.target)} |`);
    }
    for (const check of s.checks) {
      const cells = variants.map((v) => checkCell(check.cells[v.id]));
      lines.push(`| ${s.number} | ${label(`safety: ${check.label}`)} | ${cells.join(' | ')} | 0 |`);
    }
  }
  return lines.join('\n');
}
