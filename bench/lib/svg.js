/**
 * A small SVG writer for the benchmark charts: grouped horizontal bars (Coffer next to its baseline), one
 * group per backend or scenario, the value printed at the end of each bar and an optional target line.
 * Hand-made rather than vega-lite + vega: the charts are this one simple shape, and the harness stays free of
 * a large dependency tree and of font measurement in Node (output is deterministic text, easy to diff).
 */
const COLORS = ['#2563eb', '#9ca3af', '#f59e0b', '#10b981', '#ef4444', '#8b5cf6'];
const esc = (text) => String(text).replace(/[<>&"]/g, (c) => `&#${c.charCodeAt(0)};`);

function niceMax(value) {
  if (!(value > 0)) return 1;
  const power = 10 ** Math.floor(Math.log10(value));
  for (const step of [1, 2, 2.5, 5, 10]) if (step * power >= value) return step * power;
  return 10 * power;
}

function format(value) {
  if (!Number.isFinite(value)) return 'n/a';
  if (Math.abs(value) >= 100) return Math.round(value).toLocaleString('en-US');
  if (Math.abs(value) >= 10) return value.toFixed(1);
  return value.toFixed(2);
}

/**
 * chart = { title, subtitle?, unit, series: [names], groups: [{ label, note?, values: [number per series] }],
 *           target?: { value, label } }  (target is drawn as a vertical dashed line)
 * or { panels: [chart, …] } for several such charts stacked in one SVG (e.g. throughput above latency).
 */
export function barChart(spec) {
  const panels = (spec.panels ?? [spec]).map(panel);
  const width = 760;
  const height = panels.reduce((sum, p) => sum + p.height, 0);
  let y = 0;
  const out = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="Helvetica, Arial, sans-serif" font-size="12">`,
    `<rect width="${width}" height="${height}" fill="#ffffff"/>`,
  ];
  for (const p of panels) {
    out.push(`<g transform="translate(0 ${y})">`, p.body, '</g>');
    y += p.height;
  }
  out.push('</svg>');
  return out.join('\n') + '\n';
}

function panel(chart) {
  const width = 760;
  const left = 190;
  const right = 90;
  const barHeight = 16;
  const barGap = 3;
  const groupGap = 16;
  const top = chart.subtitle ? 62 : 46;
  const legendHeight = 26;
  const plotWidth = width - left - right;
  const groups = chart.groups;
  const perGroup = chart.series.length * (barHeight + barGap) - barGap;
  const plotHeight = groups.length * (perGroup + groupGap);
  const height = top + plotHeight + 34 + legendHeight;
  const all = groups.flatMap((g) => g.values).filter(Number.isFinite);
  const max = niceMax(Math.max(...all, chart.target?.value ?? 0));
  const x = (value) => left + (Math.max(0, value) / max) * plotWidth;

  const out = [];
  out.push(`<text x="12" y="22" font-size="15" font-weight="bold">${esc(chart.title)}</text>`);
  if (chart.subtitle) out.push(`<text x="12" y="40" fill="#4b5563">${esc(chart.subtitle)}</text>`);
  // Grid and axis.
  for (let i = 0; i <= 4; i++) {
    const value = (max / 4) * i;
    const gx = x(value);
    out.push(`<line x1="${gx}" y1="${top - 6}" x2="${gx}" y2="${top + plotHeight}" stroke="#e5e7eb"/>`);
    out.push(`<text x="${gx}" y="${top + plotHeight + 14}" text-anchor="middle" fill="#6b7280">${esc(format(value))}</text>`);
  }
  out.push(`<text x="${left + plotWidth / 2}" y="${top + plotHeight + 30}" text-anchor="middle" fill="#374151">${esc(chart.unit)}</text>`);
  groups.forEach((group, gi) => {
    const gy = top + gi * (perGroup + groupGap);
    out.push(
      `<text x="${left - 8}" y="${gy + perGroup / 2 - (group.note ? 2 : -4)}" text-anchor="end" font-weight="bold">${esc(group.label)}</text>`,
    );
    if (group.note)
      out.push(`<text x="${left - 8}" y="${gy + perGroup / 2 + 12}" text-anchor="end" fill="#4b5563">${esc(group.note)}</text>`);
    group.values.forEach((value, si) => {
      const by = gy + si * (barHeight + barGap);
      const w = Number.isFinite(value) ? Math.max(1, x(value) - left) : 0;
      out.push(`<rect x="${left}" y="${by}" width="${w.toFixed(1)}" height="${barHeight}" fill="${COLORS[si % COLORS.length]}"/>`);
      out.push(`<text x="${left + w + 4}" y="${by + barHeight - 4}" fill="#111827">${esc(format(value))}</text>`);
    });
  });
  if (chart.target) {
    const tx = x(chart.target.value);
    out.push(
      `<line x1="${tx}" y1="${top - 8}" x2="${tx}" y2="${top + plotHeight}" stroke="#dc2626" stroke-dasharray="5,4" stroke-width="1.5"/>`,
    );
    out.push(
      `<text x="${Math.min(tx + 4, width - 4)}" y="${top - 10}" fill="#dc2626" text-anchor="${tx > width - 150 ? 'end' : 'start'}">${esc(chart.target.label)}</text>`,
    );
  }
  // Legend.
  let lx = left;
  const ly = height - 14;
  chart.series.forEach((name, si) => {
    out.push(`<rect x="${lx}" y="${ly - 10}" width="12" height="12" fill="${COLORS[si % COLORS.length]}"/>`);
    out.push(`<text x="${lx + 16}" y="${ly}">${esc(name)}</text>`);
    lx += 24 + name.length * 6.5;
  });
  return { body: out.join('\n'), height };
}
