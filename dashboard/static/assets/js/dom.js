// Element builders and the formats of times, durations and rates.

// h builds an HTML element: h('a', {href: '#/', class: 'x', onclick: f}, 'text', child...).
// Props starting with "on" are listeners; false, null and undefined props
// and children are left out; arrays of children are flattened.
export function h(tag, props, ...children) {
  return build(document.createElement(tag), props, children);
}

const svgNS = 'http://www.w3.org/2000/svg';

// s builds an SVG element as h builds an HTML one.
export function s(tag, props, ...children) {
  return build(document.createElementNS(svgNS, tag), props, children);
}

function build(el, props, children) {
  for (const [k, v] of Object.entries(props || {})) {
    if (v === false || v === null || v === undefined) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === false || c === null || c === undefined) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : String(c));
  }
}

// swap replaces container's children with nodes, keeping the focus on the
// element of the same data-key if the focus was inside, so that a refresh
// every few seconds does not throw a keyboard user back to the top.
export function swap(container, ...nodes) {
  const active = document.activeElement;
  const inside = active && active !== container && container.contains(active);
  const key = inside ? active.dataset.key : undefined;
  container.replaceChildren(...nodes.flat(Infinity).filter((n) => n !== null && n !== undefined && n !== false));
  if (!inside) return;
  const again = key && container.querySelector(`[data-key="${CSS.escape(key)}"]`);
  if (again && !again.disabled) again.focus();
  else document.querySelector('main h1')?.focus();
}

// The server's clock minus the browser's, in ms, from the last answer
// that carried the server's time: relative times and charts use it.
let skew = 0;
export function setServerTime(iso) {
  const t = Date.parse(iso);
  if (!Number.isNaN(t)) skew = t - Date.now();
}
export function now() {
  return Date.now() + skew;
}

// Every time shown names its zone: the browser's own ("14:05:09 GMT+1",
// "UTC" where the browser runs in UTC), or the zone given (a schedule's
// times in the schedule's zone). The zone's short name comes from Intl,
// which also gives the wall-clock fields in that zone.

// formatters holds an Intl.DateTimeFormat by zone ('' for the browser's).
const formatters = new Map();

function formatter(zone) {
  let f = formatters.get(zone);
  if (!f) {
    const opts = {year: 'numeric', month: '2-digit', day: '2-digit', hour: '2-digit', minute: '2-digit', second: '2-digit',
      hourCycle: 'h23', timeZoneName: 'short'};
    if (zone) opts.timeZone = zone;
    try {
      f = new Intl.DateTimeFormat('en-US', opts);
    } catch {
      f = formatter('UTC'); // a zone this browser does not know: shown in UTC, and said so
    }
    formatters.set(zone, f);
  }
  return f;
}

// fields answers t's wall-clock fields in zone ('' or undefined: the
// browser's): {y, mo, d, hh, mm, ss, tz}, each a string, tz the zone's
// short name ("UTC", "GMT+1", "EST").
export function fields(t, zone = '') {
  const out = {};
  for (const p of formatter(zone || '').formatToParts(new Date(t))) {
    if (p.type === 'year') out.y = p.value;
    else if (p.type === 'month') out.mo = p.value;
    else if (p.type === 'day') out.d = p.value;
    else if (p.type === 'hour') out.hh = p.value;
    else if (p.type === 'minute') out.mm = p.value;
    else if (p.type === 'second') out.ss = p.value;
    else if (p.type === 'timeZoneName') out.tz = p.value;
  }
  return out;
}

// localZone names the browser's zone: "Europe/Paris (GMT+1)", or "UTC".
export function localZone() {
  const name = Intl.DateTimeFormat().resolvedOptions().timeZone || '';
  const tz = fields(now()).tz;
  return !name || name === tz || /^(Etc\/)?UTC$/.test(name) ? tz : `${name} (${tz})`;
}

// clock formats a time with its zone, in the browser's zone or the zone
// given: "14:05:09 GMT+1" today, "2026-03-01 14:05 GMT+1" on other days
// (of that zone).
export function clock(t, zone = '') {
  const f = fields(t, zone);
  const today = fields(now(), zone);
  const hms = `${f.hh}:${f.mm}:${f.ss}`;
  if (f.y === today.y && f.mo === today.mo && f.d === today.d) return `${hms} ${f.tz}`;
  return `${f.y}-${f.mo}-${f.d} ${hms.slice(0, 5)} ${f.tz}`;
}

// hhmm formats a time's hour and minute in the browser's zone: "14:05",
// with its zone when label is set: "14:05 GMT+1".
export function hhmm(t, label = false) {
  const f = fields(t);
  return `${f.hh}:${f.mm}` + (label ? ' ' + f.tz : '');
}

// relative says how far a time is from now: "in 4 min", "12 s ago", "now".
export function relative(t) {
  const ms = t - now();
  const a = Math.abs(ms);
  if (a < 1000) return 'now';
  const text = span(a);
  return ms > 0 ? 'in ' + text : text + ' ago';
}

// span formats a long duration in ms coarsely: "12 s", "4 min", "3 h 5 min", "2 d 4 h".
export function span(ms) {
  const sec = Math.floor(ms / 1000);
  if (sec < 60) return `${sec} s`;
  const min = Math.floor(sec / 60);
  if (min < 60) return `${min} min`;
  const hr = Math.floor(min / 60);
  if (hr < 48) return min % 60 ? `${hr} h ${min % 60} min` : `${hr} h`;
  const d = Math.floor(hr / 24);
  return hr % 24 ? `${d} d ${hr % 24} h` : `${d} d`;
}

// timeEl is a <time> element showing t with its zone, in the browser's
// zone or the zone given, and, when rel is set, how far it is from now;
// its title is the exact UTC time.
export function timeEl(iso, rel = true, zone = '') {
  if (!iso) return h('span', {}, '—');
  const t = Date.parse(iso);
  return h('time', {datetime: iso, title: iso}, clock(t, zone), rel ? h('span', {class: 'rel'}, ' (' + relative(t) + ')') : null);
}

// Units of Go duration strings, in ms.
const units = {ns: 1e-6, us: 1e-3, 'µs': 1e-3, 'μs': 1e-3, ms: 1, s: 1e3, m: 6e4, h: 3.6e6};

// parseDuration reads a Go duration string ("1.5s", "2m3.5s", "250µs") as ms.
export function parseDuration(str) {
  let rest = String(str).trim();
  let sign = 1;
  if (rest.startsWith('-')) {
    sign = -1;
    rest = rest.slice(1);
  }
  if (rest === '0') return 0;
  const re = /^([0-9]*\.?[0-9]+)(ns|us|µs|μs|ms|s|m|h)/;
  let total = 0;
  let m;
  while (rest && (m = re.exec(rest))) {
    total += parseFloat(m[1]) * units[m[2]];
    rest = rest.slice(m[0].length);
  }
  if (rest) return NaN;
  return sign * total;
}

// duration formats a short duration in ms with about three digits:
// "850 µs", "12.3 ms", "1.25 s", "2 min".
export function duration(ms) {
  if (!Number.isFinite(ms)) return '—';
  if (ms === 0) return '0';
  if (ms < 1) return `${+(ms * 1000).toPrecision(3)} µs`;
  if (ms < 1000) return `${+ms.toPrecision(3)} ms`;
  if (ms < 60000) return `${+(ms / 1000).toPrecision(3)} s`;
  return span(ms);
}

// rate formats events per second: "0/s", "0.4/s", "12/s", "1.2k/s", and
// "—" for a rate not measured yet.
export function rate(r) {
  if (r === null || r === undefined || !Number.isFinite(r)) return '—';
  if (r === 0) return '0/s';
  if (r < 10) return `${r.toFixed(1)}/s`;
  if (r < 1000) return `${Math.round(r)}/s`;
  return `${+(r / 1000).toPrecision(3)}k/s`;
}

// count formats a whole number with thousands separators.
export function count(n) {
  return Number(n).toLocaleString('en-US');
}

// plural: plural(1, 'task') is "1 task", plural(3, 'task') "3 tasks".
export function plural(n, word) {
  return `${count(n)} ${word}${n === 1 ? '' : 's'}`;
}

// stack labels a table's cells with their column headers (data-label)
// and gives every part its ARIA role, so that on a narrow screen the CSS
// can show each row as a card (table.stack in app.css) and the table
// still reads as a table: some browsers drop a table's implicit roles once
// its parts are displayed as blocks or grids. Call it after each redraw.
export function stack(table) {
  table.classList.add('stack');
  table.setAttribute('role', 'table');
  const heads = table.tHead ? [...table.tHead.rows[0].cells].map((c) => c.textContent) : [];
  for (const g of table.querySelectorAll(':scope > thead, :scope > tbody, :scope > tfoot')) g.setAttribute('role', 'rowgroup');
  for (const tr of table.rows) {
    tr.setAttribute('role', 'row');
    const head = tr.parentElement.tagName === 'THEAD';
    [...tr.cells].forEach((c, i) => {
      if (c.tagName === 'TH') c.setAttribute('role', head ? 'columnheader' : 'rowheader');
      else c.setAttribute('role', 'cell');
      if (!head) c.dataset.label = c.colSpan > 1 ? '' : heads[i] || '';
    });
  }
}
