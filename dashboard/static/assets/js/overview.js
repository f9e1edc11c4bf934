// #/: every queue with its counts and rates (and whether it is paused),
// and the two charts.

import {call, atMostEvery} from './api.js';
import {h, swap, stack, count, rate, now, setServerTime} from './dom.js';
import {latenessFigure, dueFigure} from './charts.js';

// samples of GET /v1/stats/queues, oldest first, kept across pages: the
// rates are the differences of the counters over the last rateWindow ms.
const samples = [];
const rateWindow = 30000;

// queueStats reads the counts and counters and answers them with rates:
// {time, queues: [{name, delayed, ..., putRate, deliveryRate}]}. A rate
// is null until two answers are at least a second apart.
export async function queueStats() {
  const res = await call('GET', '/v1/stats/queues');
  setServerTime(res.time);
  const t = Date.parse(res.time);
  const byName = new Map(res.queues.map((q) => [q.name, q]));
  // A counter going down means the server restarted: start again.
  const last = samples.at(-1);
  const restarted = last && (t < last.t || [...last.byName].some(([n, q]) =>
    byName.has(n) && (byName.get(n).puts < q.puts || byName.get(n).deliveries < q.deliveries)));
  if (restarted) samples.length = 0;
  samples.push({t, byName});
  while (samples.length > 2 && t - samples[1].t >= rateWindow) samples.shift();
  const base = samples[0];
  const dt = (t - base.t) / 1000;
  for (const q of res.queues) {
    const b = base.byName.get(q.name) || {puts: 0, deliveries: 0};
    q.putRate = dt >= 1 ? (q.puts - b.puts) / dt : null;
    q.deliveryRate = dt >= 1 ? (q.deliveries - b.deliveries) / dt : null;
  }
  return res;
}

// dueEvery is how often the due-time histogram is read again, in ms.
export const dueEvery = 30000;

const columns = [
  ['delayed', 'Delayed'],
  ['ready', 'Ready'],
  ['reserved', 'Reserved'],
  ['dead', 'Dead'],
  ['putRate', 'Puts/s'],
  ['deliveryRate', 'Deliveries/s'], // handed to reservers, or pushed
];

function cell(q, key) {
  const v = q[key];
  if (key === 'putRate' || key === 'deliveryRate') {
    return h('td', {class: 'num', 'data-col': key, title: v === null ? 'measured from the second update on' : null}, rate(v));
  }
  if (key === 'dead' && v > 0 && q.name) {
    return h('td', {class: 'num', 'data-col': key},
      h('a', {href: `#/queues/${encodeURIComponent(q.name)}/dead`, 'data-key': 'dead:' + q.name, class: 'dead-link',
        'aria-label': `${count(v)} dead in ${q.name}`}, h('span', {class: 'flag', 'aria-hidden': 'true'}, '⚠ '), count(v)));
  }
  return h('td', {class: 'num', 'data-col': key}, count(v));
}

export function enter(main, params, ctx) {
  const tbody = h('tbody');
  const tfoot = h('tfoot');
  let table;
  const empty = h('p', {class: 'hint', hidden: true});
  const late = h('div', {class: 'figure-body', id: 'lateness'});
  const waiting = h('div', {class: 'figure-body', id: 'waiting'});
  const due = h('div', {class: 'figure-body', id: 'due'});
  main.append(
    h('h1', {tabindex: -1}, 'Overview'),
    h('section', {'aria-labelledby': 'queues-h'},
      h('h2', {id: 'queues-h'}, 'Queues'),
      empty,
      h('div', {class: 'scroll', role: 'region', 'aria-labelledby': 'queues-h', tabindex: 0},
        table = h('table', {id: 'queues', class: 'counts'},
          h('thead', {}, h('tr', {}, h('th', {scope: 'col'}, 'Queue'), columns.map(([, label]) => h('th', {scope: 'col', class: 'num'}, label)))),
          tbody, tfoot))),
    h('div', {class: 'charts'},
      h('section', {class: 'figure', 'aria-labelledby': 'late-h'},
        h('h2', {id: 'late-h'}, 'Server lateness, last 15 minutes'),
        h('p', {class: 'hint'}, 'How late the server made tasks ready: from a task\'s due time to ready, by 10-second window of hand-over. A task ready at once (put due now, nacked, kicked) counts 0. The server counts in powers of two, so p50 and p99 are upper bounds within a factor of two.'),
        late),
      h('section', {class: 'figure', 'aria-labelledby': 'wait-h'},
        h('h2', {id: 'wait-h'}, 'Ready tasks waiting for a worker, last 15 minutes'),
        h('p', {class: 'hint'}, 'From ready to hand-over: no reserver asking (workers busy or gone), or the queue paused or limited. Not the server being late.'),
        waiting),
      h('section', {class: 'figure', 'aria-labelledby': 'due-h'},
        h('h2', {id: 'due-h'}, 'Falling due in the next hour'),
        h('p', {class: 'hint'}, 'Delayed tasks of every queue, by the minute they fall due.'),
        due)));

  return {
    title: 'Overview',
    async refresh() {
      const [stats, lateness, dueHist, all] = await Promise.all([
        queueStats(),
        call('GET', '/v1/stats/lateness'),
        atMostEvery('due', dueEvery, () => call('GET', '/v1/stats/due?width=1m&n=60')),
        call('GET', '/v1/queues'),
      ]);
      const qs = stats.queues;
      const paused = new Set(all.queues.filter((q) => q.paused).map((q) => q.name));
      const pushed = new Set(all.queues.filter((q) => q.policy?.push).map((q) => q.name));
      swap(tbody, qs.map((q) => h('tr', {'data-queue': q.name},
        h('th', {scope: 'row'}, h('a', {href: '#/queues/' + encodeURIComponent(q.name), 'data-key': 'q:' + q.name}, q.name),
          paused.has(q.name) ? h('span', {class: 'tag paused'}, 'paused') : null,
          pushed.has(q.name) ? h('span', {class: 'tag push', title: 'Its tasks are pushed to an endpoint: its deliveries are pushes'}, 'push') : null),
        columns.map(([key]) => cell(q, key)))));
      const sum = (key) => qs.some((q) => q[key] === null) ? null : qs.reduce((a, q) => a + q[key], 0);
      const total = Object.fromEntries(columns.map(([key]) => [key, sum(key)]));
      swap(tfoot, qs.length > 1 ? h('tr', {}, h('th', {scope: 'row'}, 'All queues'), columns.map(([key]) => cell(total, key))) : []);
      stack(table);
      empty.hidden = qs.length > 0;
      empty.textContent = qs.length ? '' : 'No queues yet: a queue appears with its first task (POST /v1/queues/NAME/tasks).';
      latenessFigure(late, lateness.windows, now(), 'lateness');
      latenessFigure(waiting, lateness.windows, now(), 'waiting');
      dueFigure(due, dueHist, '');
    },
  };
}
