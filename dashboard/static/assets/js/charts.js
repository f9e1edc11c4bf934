// The charts, hand-written SVG: delivery lateness split in its two parts
// (p50 and p99 by 10-second window over the last 15 minutes, on a log
// scale): the server's own (due → ready) and the wait of ready tasks for
// a worker (ready → hand-over), each its own chart; and how many tasks
// fall due in each minute of the next hour. Each figure carries a
// summary in words and a table of its data, so that nothing depends on
// seeing the drawing or its colours: the two lines differ by dash and
// marker shape too.

import {h, s, swap, clock, hhmm, duration, parseDuration, plural, count} from './dom.js';

const height = 200;
const pad = {top: 12, right: 14, bottom: 26, left: 60};

const deliveries = (n) => count(n) + (n === 1 ? ' delivery' : ' deliveries');

// widthOf returns the drawing width for a figure's container.
function widthOf(el) {
  return Math.max(260, Math.floor(el.clientWidth || 600));
}

// The two parts of lateness (api.LatenessWindow's ready and wait), by
// the name of their figure: what each measures, in the words of its
// summary.
export const latenessParts = {
  'lateness': {key: 'ready', what: 'server lateness (due → ready)', chart: 'Server lateness chart'},
  'waiting': {key: 'wait', what: 'wait for a worker (ready → hand-over)', chart: 'Wait for a worker chart'},
};

// latenessFigure draws one part (name, of latenessParts) of windows (GET
// /v1/stats/lateness) into container; now is the server's time in ms.
export function latenessFigure(container, windows, now, name = 'lateness') {
  const part = latenessParts[name];
  const span = 15 * 60 * 1000;
  const from = now - span;
  const pts = windows.map((w) => ({
    t: Date.parse(w.start) + 5000, // the window's middle
    start: w.start,
    n: w.deliveries,
    p50: parseDuration(w[part.key]?.p50 ?? '0s'),
    p99: parseDuration(w[part.key]?.p99 ?? '0s'),
    max: parseDuration(w[part.key]?.max ?? '0s'),
  })).filter((p) => p.t >= from);
  const total = pts.reduce((a, p) => a + p.n, 0);
  const worst = pts.reduce((a, p) => Math.max(a, p.p99), 0);
  const summary = pts.length === 0
    ? 'No deliveries in the last 15 minutes.'
    : `${deliveries(total)} in the last 15 minutes; ${part.what}: worst p99 ${duration(worst)}; ` +
      `latest window p50 ${duration(pts.at(-1).p50)}, p99 ${duration(pts.at(-1).p99)}.`;

  const W = widthOf(container);
  const plotW = W - pad.left - pad.right;
  const plotH = height - pad.top - pad.bottom;
  const x = (t) => pad.left + ((t - from) / span) * plotW;
  // A log scale from a power of ten at or below the least p50 to one
  // above the greatest p99, two decades at least.
  let lo = 1e-3;
  let hi = 1;
  if (pts.length) {
    lo = 10 ** Math.floor(Math.log10(Math.max(1e-3, Math.min(...pts.map((p) => p.p50)))));
    hi = 10 ** Math.ceil(Math.log10(Math.max(...pts.map((p) => p.p99)) * 1.01));
    if (hi / lo < 100) hi = lo * 100;
  }
  const y = (ms) => pad.top + plotH - (Math.log10(Math.max(ms, lo) / lo) / Math.log10(hi / lo)) * plotH;

  const grid = [];
  for (let v = lo; v <= hi * 1.0001; v *= 10) {
    grid.push(s('line', {class: 'grid', x1: pad.left, x2: W - pad.right, y1: y(v), y2: y(v)}));
    grid.push(s('text', {class: 'tick', x: pad.left - 6, y: y(v) + 4, 'text-anchor': 'end'}, duration(v)));
  }
  for (let m = 15; m >= 0; m -= 5) {
    grid.push(s('text', {class: 'tick', x: x(now - m * 60000), y: height - 8, 'text-anchor': m === 15 ? 'start' : m === 0 ? 'end' : 'middle'},
      m === 0 ? 'now' : `${m} min ago`));
  }

  // The lines break where a window had no deliveries.
  const path = (key) => {
    let d = '';
    let prev = null;
    for (const p of pts) {
      d += (prev && p.t - prev.t <= 10000 ? 'L' : 'M') + x(p.t).toFixed(1) + ' ' + y(p[key]).toFixed(1);
      prev = p;
    }
    return d || 'M0 0';
  };
  const marks = [];
  for (const p of pts) {
    const tip = `${clock(Date.parse(p.start))}: ${deliveries(p.n)}, p50 ${duration(p.p50)}, p99 ${duration(p.p99)}, max ${duration(p.max)}`;
    marks.push(s('circle', {class: 'p50', cx: x(p.t), cy: y(p.p50), r: 2.5}, s('title', {}, tip)));
    marks.push(s('rect', {class: 'p99', x: x(p.t) - 2.5, y: y(p.p99) - 2.5, width: 5, height: 5}, s('title', {}, tip)));
  }
  const svg = s('svg', {width: W, height, viewBox: `0 0 ${W} ${height}`, role: 'img', 'aria-label': part.chart + '. ' + summary},
    grid,
    s('line', {class: 'axis', x1: pad.left, x2: W - pad.right, y1: pad.top + plotH, y2: pad.top + plotH}),
    pts.length ? [s('path', {class: 'line p50', d: path('p50')}), s('path', {class: 'line p99', d: path('p99')})] : null,
    marks,
    pts.length ? null : s('text', {class: 'empty', x: pad.left + plotW / 2, y: pad.top + plotH / 2, 'text-anchor': 'middle'}, 'No deliveries yet'));

  const table = h('table', {class: 'data'},
    h('caption', {}, `${part.what[0].toUpperCase() + part.what.slice(1)} by 10-second window, newest first`),
    h('thead', {}, h('tr', {}, ['Window start', 'Deliveries', 'p50', 'p99', 'Max'].map((c) => h('th', {scope: 'col'}, c)))),
    h('tbody', {}, pts.length ? pts.slice().reverse().map((p) => h('tr', {},
      h('td', {}, clock(Date.parse(p.start))), h('td', {class: 'num'}, count(p.n)),
      h('td', {class: 'num'}, duration(p.p50)), h('td', {class: 'num'}, duration(p.p99)), h('td', {class: 'num'}, duration(p.max))))
      : h('tr', {}, h('td', {colspan: 5}, 'No deliveries in the last 15 minutes.'))));

  draw(container, name, svg, summary, [
    legendItem('p50', 'p50 (median): solid line, circles'),
    legendItem('p99', 'p99: dashed line, squares'),
  ], table);
}

// dueFigure draws a due-time histogram (GET /v1/stats/due) into
// container; where names what it counts (" in this queue").
export function dueFigure(container, due, where) {
  const counts = due.counts;
  const start = Date.parse(due.start);
  const width = parseDuration(due.width);
  const total = counts.reduce((a, b) => a + b, 0);
  let busiest = 0;
  counts.forEach((c, i) => {
    if (c > counts[busiest]) busiest = i;
  });
  const at = (i) => start + i * width;
  const hm = (t) => hhmm(t);
  const summary = total === 0
    ? `No delayed task falls due in the next hour${where}.`
    : `${plural(total, 'task')} fall${total === 1 ? 's' : ''} due in the next hour${where}; ` +
      `the busiest minute is ${hhmm(at(busiest), true)} with ${count(counts[busiest])}.`;

  const W = widthOf(container);
  const plotW = W - pad.left - pad.right;
  const plotH = height - pad.top - pad.bottom;
  const top = niceCeil(Math.max(...counts, 1));
  const y = (c) => pad.top + plotH - (c / top) * plotH;
  const bw = plotW / counts.length;
  const grid = [];
  for (const v of [0, top / 2, top]) {
    if (v !== Math.round(v)) continue;
    grid.push(s('line', {class: 'grid', x1: pad.left, x2: W - pad.right, y1: y(v), y2: y(v)}));
    grid.push(s('text', {class: 'tick', x: pad.left - 6, y: y(v) + 4, 'text-anchor': 'end'}, count(v)));
  }
  const minutes = (counts.length * width) / 60000;
  for (const f of [0, 0.25, 0.5, 0.75, 1]) {
    const m = Math.round(minutes * f);
    grid.push(s('text', {class: 'tick', x: pad.left + plotW * f, y: height - 8, 'text-anchor': f === 0 ? 'start' : f === 1 ? 'end' : 'middle'},
      m === 0 ? 'now' : `+${m} min`));
  }
  const bars = counts.map((c, i) => c === 0 ? null : s('rect', {
    class: 'bar', x: (pad.left + i * bw + 0.5).toFixed(1), y: y(c).toFixed(1),
    width: Math.max(1, bw - 1).toFixed(1), height: (pad.top + plotH - y(c)).toFixed(1),
  }, s('title', {}, `${hm(at(i))}–${hhmm(at(i + 1), true)}: ${plural(c, 'task')}`)));
  const svg = s('svg', {width: W, height, viewBox: `0 0 ${W} ${height}`, role: 'img', 'aria-label': 'Due-time histogram. ' + summary},
    grid,
    s('line', {class: 'axis', x1: pad.left, x2: W - pad.right, y1: pad.top + plotH, y2: pad.top + plotH}),
    bars,
    total ? null : s('text', {class: 'empty', x: pad.left + plotW / 2, y: pad.top + plotH / 2, 'text-anchor': 'middle'}, 'Nothing due'));

  const rows = counts.map((c, i) => [c, i]).filter(([c]) => c > 0);
  const table = h('table', {class: 'data'},
    h('caption', {}, 'Tasks falling due by minute (minutes with none left out)'),
    h('thead', {}, h('tr', {}, h('th', {scope: 'col'}, 'From'), h('th', {scope: 'col'}, 'Tasks'))),
    h('tbody', {}, rows.length ? rows.map(([c, i]) => h('tr', {}, h('td', {}, clock(at(i))), h('td', {class: 'num'}, count(c))))
      : h('tr', {}, h('td', {colspan: 2}, 'None.'))));
  draw(container, 'due', svg, summary, [], table);
}

// niceCeil rounds n up to 1, 2 or 5 times a power of ten.
function niceCeil(n) {
  const p = 10 ** Math.floor(Math.log10(n));
  for (const m of [1, 2, 5, 10]) if (m * p >= n) return m * p;
  return 10 * p;
}

function legendItem(cls, text) {
  return h('li', {}, s('svg', {width: 28, height: 10, 'aria-hidden': 'true'},
    s('line', {class: 'line ' + cls, x1: 1, x2: 27, y1: 5, y2: 5}),
    cls === 'p50' ? s('circle', {class: cls, cx: 14, cy: 5, r: 2.5}) : s('rect', {class: cls, x: 11.5, y: 2.5, width: 5, height: 5})),
  ' ', text);
}

// draw fills a chart's container: the summary, legend, drawing and the
// data table in a <details>, kept open if the reader opened it.
function draw(container, name, svg, summary, legend, table) {
  const open = container.querySelector('details')?.open;
  swap(container,
    h('p', {class: 'summary', 'data-summary': name}, summary),
    legend.length ? h('ul', {class: 'legend'}, legend) : null,
    h('div', {class: 'chart'}, svg),
    h('details', {open: !!open}, h('summary', {'data-key': name + '-table'}, 'Show the data as a table'), h('div', {class: 'scroll'}, table)),
  );
}
