// The history (api/history.go): a task's attempts, shown in the task
// dialog, and a queue's recent history (the tasks that left it: acked,
// dead, deleted or cancelled, newest first), a section of the queue's page with a
// filter by outcome and pages.

import {call, seg} from './api.js';
import {h, swap, stack, count, plural, timeEl, duration, parseDuration} from './dom.js';

const outcomes = ['all', 'acked', 'dead', 'deleted', 'cancelled'];
const pageSize = 20;

const title = (s) => s[0].toUpperCase() + s.slice(1);

// attemptsPath is the route of a task's attempts.
export const attemptsPath = (queue, id) => `/v1/queues/${seg(queue)}/tasks/${seg(id)}/attempts`;

// attemptsView shows a task's attempts (api.Attempt, oldest first) as a
// table, newest first: each one's start, end, outcome and duration, with
// its error, a push's status and the node that ended it. A running
// attempt has no end and reads "running".
export function attemptsView(attempts) {
  if (!attempts.length) return h('p', {class: 'hint', id: 'attempts-none'}, 'No attempts yet.');
  const rows = attempts.slice().reverse().map((a) => h('tr', {'data-attempt': String(a.attempt), 'data-outcome': a.outcome || 'running'},
    h('th', {scope: 'row', class: 'num'}, String(a.attempt)),
    h('td', {}, timeEl(a.started, false)),
    h('td', {}, a.ended ? timeEl(a.ended, false) : '—'),
    h('td', {}, outcomeEl(a.outcome || 'running')),
    h('td', {class: 'num'}, duration(parseDuration(a.duration))),
    h('td', {class: 'note'},
      a.error ? h('span', {class: 'last-error', 'data-field': 'error'}, a.error) : null,
      a.status ? h('span', {'data-field': 'status'}, `HTTP ${a.status}`) : null,
      a.node ? h('span', {'data-field': 'node'}, `node ${a.node}`) : null)));
  const table = h('table', {id: 'attempts', class: 'data'},
    h('caption', {}, `${plural(attempts.length, 'attempt')}, newest first`),
    h('thead', {}, h('tr', {}, ['#', 'Started', 'Ended', 'Outcome', 'Took', 'Error']
      .map((c) => h('th', {scope: 'col', class: c === '#' || c === 'Took' ? 'num' : null}, c)))),
    h('tbody', {}, rows));
  stack(table);
  return h('div', {class: 'scroll attempts', role: 'region', 'aria-label': 'Attempts', tabindex: 0}, table);
}

// outcomeEl shows an attempt's or a finished task's outcome as a word,
// styled by it.
function outcomeEl(outcome) {
  return h('span', {class: 'outcome outcome-' + outcome}, outcome);
}

// historySection builds the section of a queue's page that lists its
// history; open(f) shows a finished task (api.FinishedTask). refresh
// reads the page shown and redraws it, throwing the API's errors.
export function historySection(queue, ctx, open) {
  const base = `/v1/queues/${seg(queue)}/history`;
  let shown = 'all'; // the outcome listed
  let pages = [0]; // the after of each page up to the current one
  let next = 0; // the after of the next page; 0: none

  const tabs = h('div', {class: 'tabs', role: 'group', 'aria-label': 'List the finished tasks with outcome'});
  const tbody = h('tbody');
  const caption = h('caption', {});
  const pager = h('div', {class: 'buttons pager'});
  const note = h('p', {class: 'hint', id: 'history-note'});
  let table;
  const el = h('section', {'aria-labelledby': 'history-h'},
    h('h2', {id: 'history-h'}, 'History'),
    h('p', {class: 'hint'}, 'The tasks that left this queue, newest first, kept for the server\'s --history (24 h by default).'),
    tabs,
    h('div', {class: 'scroll', role: 'region', 'aria-labelledby': 'history-h', tabindex: 0},
      table = h('table', {id: 'history'}, caption,
        h('thead', {}, h('tr', {}, ['Id', 'Job', 'Outcome', 'Finished', 'Attempts', 'Last error']
          .map((c) => h('th', {scope: 'col', class: ['Job', 'Attempts'].includes(c) ? 'num' : null}, c)))),
        tbody)),
    note,
    pager);

  function select(o) {
    shown = o;
    pages = [0];
    ctx.refresh();
  }

  function turn(to) {
    if (to === 'next' && next) pages.push(next);
    else if (to === 'prev' && pages.length > 1) pages.pop();
    else if (to === 'first') pages = [0];
    ctx.refresh();
  }

  function row(f) {
    return h('tr', {'data-id': f.id, 'data-job': String(f.job_id), 'data-outcome': f.outcome},
      h('th', {scope: 'row'}, h('button', {type: 'button', class: 'link', 'data-key': 'finished:' + f.job_id, 'aria-label': `Show finished task ${f.id}`,
        onclick: () => ctx.act(() => open(f))}, f.id)),
      h('td', {class: 'num'}, String(f.job_id)),
      h('td', {}, outcomeEl(f.outcome)),
      h('td', {}, timeEl(f.finished)),
      h('td', {class: 'num'}, count(f.attempts)),
      h('td', {class: 'note'}, f.last_error ? h('span', {class: 'last-error', title: f.last_error}, f.last_error) : null));
  }

  async function refresh() {
    const q = `${shown === 'all' ? '' : `outcome=${shown}&`}after=${pages.at(-1)}&limit=${pageSize}`;
    const page = await call('GET', `${base}?${q}`);
    next = page.next || 0;
    swap(tabs, outcomes.map((o) => h('button', {type: 'button', 'aria-pressed': String(o === shown), 'data-key': 'htab:' + o, 'data-outcome': o,
      onclick: () => select(o)}, title(o))));
    caption.textContent = `${shown === 'all' ? 'Finished tasks' : title(shown) + ' tasks'}, page ${pages.length}, newest first`;
    const none = pages.length > 1 ? 'No more finished tasks.' : `No ${shown === 'all' ? 'finished' : shown} tasks kept.`;
    swap(tbody, page.tasks.length ? page.tasks.map(row) : h('tr', {}, h('td', {colspan: 6}, none)));
    stack(table);
    note.textContent = `Page ${pages.length}${page.tasks.length ? `: ${plural(page.tasks.length, 'task')}` : ''}${next ? '; more follow' : ''}.`;
    swap(pager,
      h('button', {type: 'button', 'data-key': 'hfirst', disabled: pages.length === 1, onclick: () => turn('first')}, 'First page'),
      h('button', {type: 'button', 'data-key': 'hprev', disabled: pages.length === 1, onclick: () => turn('prev')}, 'Previous page'),
      h('button', {type: 'button', 'data-key': 'hnext', disabled: !next, onclick: () => turn('next')}, 'Next page'));
  }

  return {el, refresh};
}
