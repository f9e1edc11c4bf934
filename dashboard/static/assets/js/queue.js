// #/queues/NAME/STATE: one queue's counts, its pause (with pause and
// resume) and policy, its tasks by state in pages (with a dead task's
// last error and a reserved task's lease end), finding a task by id,
// showing (with its attempts), deleting and kicking tasks, the queue's
// history by outcome (history.js), the queue's due times over the
// next hour, a search of its tasks by last error and id prefix with
// actions on every task it matches (api/bulk.go), and its busiest keys
// (api.KeysResponse).

import {call, seg, ApiError, atMostEvery} from './api.js';
import {h, swap, stack, count, rate, plural, timeEl, duration, parseDuration} from './dom.js';
import {dueFigure} from './charts.js';
import {queueStats, dueEvery} from './overview.js';
import {confirmAction, showTask, showFinished} from './dialogs.js';
import {historySection} from './history.js';

const states = ['all', 'delayed', 'ready', 'reserved', 'dead'];
const pageSize = 20;
const keysShown = 20;

const title = (st) => st[0].toUpperCase() + st.slice(1);

export function enter(main, {queue, state}, ctx) {
  const base = `/v1/queues/${seg(queue)}`;
  let shown = state; // the state listed
  let pages = ['']; // the after of each page up to the current one: opaque cursors
  let next = ''; // the after of the next page; '': none
  let search = {error: '', id_prefix: ''}; // the search applied; empty: none

  const counts = h('dl', {class: 'tally'});
  const pauseLine = h('p', {id: 'pause-state', role: 'status'});
  const pauseButtons = h('div', {class: 'buttons'});
  const policyBody = h('div', {id: 'policy'});
  const keysBody = h('div', {id: 'keys'});
  const tabs = h('div', {class: 'tabs', role: 'group', 'aria-label': 'List the tasks in state'});
  const bulk = h('div', {class: 'buttons bulk'});
  const tbody = h('tbody');
  const caption = h('caption', {});
  let table;
  const pager = h('div', {class: 'buttons pager'});
  const pageNote = h('p', {class: 'hint', id: 'page-note'});
  const due = h('div', {class: 'figure-body', id: 'due'});
  const findInput = h('input', {id: 'find-id', name: 'id', required: true, autocomplete: 'off', spellcheck: 'false', 'aria-describedby': 'find-result'});
  const findResult = h('p', {id: 'find-result', role: 'status'});
  const searchError = h('input', {id: 'search-error', name: 'error', autocomplete: 'off', spellcheck: 'false', maxlength: 200});
  const searchPrefix = h('input', {id: 'search-prefix', name: 'id_prefix', autocomplete: 'off', spellcheck: 'false', maxlength: 200});
  const finished = historySection(queue, ctx, (f) => showFinished(queue, f));

  main.append(
    h('nav', {'aria-label': 'Breadcrumb', class: 'crumbs'}, h('a', {href: '#/'}, 'Overview'), ' › ', h('span', {'aria-current': 'page'}, queue)),
    h('h1', {tabindex: -1}, 'Queue ', h('span', {class: 'name'}, queue)),
    counts,
    h('section', {'aria-labelledby': 'policy-h'},
      h('h2', {id: 'policy-h'}, 'Pause and policy'),
      pauseLine, pauseButtons, policyBody),
    h('section', {'aria-labelledby': 'find-h'},
      h('h2', {id: 'find-h'}, 'Find a task'),
      h('form', {class: 'inline', onsubmit: find},
        h('label', {for: 'find-id'}, 'Task id'), findInput, h('button', {type: 'submit'}, 'Find')),
      findResult),
    h('section', {'aria-labelledby': 'tasks-h'},
      h('h2', {id: 'tasks-h'}, 'Tasks'),
      tabs,
      h('form', {class: 'inline', id: 'search', role: 'search', onsubmit: applySearch},
        h('label', {for: 'search-error'}, 'Last error contains'), searchError,
        h('label', {for: 'search-prefix'}, 'Id starts with'), searchPrefix,
        h('button', {type: 'submit', 'data-key': 'search'}, 'Search'),
        h('button', {type: 'button', 'data-key': 'clear-search', onclick: clearSearch}, 'Clear')),
      bulk,
      h('div', {class: 'scroll', role: 'region', 'aria-labelledby': 'tasks-h', tabindex: 0},
        table = h('table', {id: 'tasks'}, caption,
          h('thead', {}, h('tr', {}, ['Id', 'Job', 'State', 'Due', 'Priority', 'Attempts', 'Lease or last error', 'Actions']
            .map((c) => h('th', {scope: 'col', class: ['Job', 'Priority', 'Attempts'].includes(c) ? 'num' : null}, c)))),
          tbody)),
      pageNote,
      pager),
    h('section', {'aria-labelledby': 'keys-h'},
      h('h2', {id: 'keys-h'}, 'Keys'),
      keysBody),
    finished.el,
    h('section', {class: 'figure', 'aria-labelledby': 'due-h'},
      h('h2', {id: 'due-h'}, 'Falling due in the next hour'),
      due));

  async function find(ev) {
    ev.preventDefault();
    const id = findInput.value.trim();
    if (!id) {
      findResult.textContent = 'Enter a task id.';
      findInput.focus();
      return;
    }
    findResult.textContent = '';
    await ctx.act(async () => {
      try {
        const t = await open(id);
        findResult.textContent = t.state === 'finished' ? `Task ${id} finished: ${t.outcome}.` : `Found task ${id}.`;
      } catch (e) {
        if (!(e instanceof ApiError && e.status === 404)) throw e;
        findResult.textContent = `No task “${id}” in this queue (${e.message}).`;
      }
    });
  }

  // open shows a task in the dialog, with its actions.
  function open(id) {
    return showTask(queue, id, (t, close) => [
      t.state === 'dead' ? h('button', {type: 'button', onclick: () => kick(t.id, close)}, 'Kick (make it ready)') : null,
      h('button', {type: 'button', class: 'danger', onclick: () => remove(t.id, close)}, 'Delete task'),
    ]);
  }

  async function kick(id, close) {
    await ctx.act(async () => {
      await call('POST', `${base}/tasks/${seg(id)}/kick`);
      close?.();
      ctx.notice(`Kicked task ${id}: it is ready again.`);
      await ctx.refresh();
    });
  }

  async function remove(id, close) {
    if (!await confirmAction('Delete the task?', `Delete task “${id}” of queue “${queue}”? This cannot be undone.`, 'Delete task')) return;
    await ctx.act(async () => {
      try {
        await call('DELETE', `${base}/tasks/${seg(id)}`);
        ctx.notice(`Deleted task ${id}.`);
      } catch (e) {
        if (!(e instanceof ApiError && e.status === 404)) throw e;
        ctx.notice(`Task ${id} was gone already.`);
      }
      close?.();
      await ctx.refresh();
    });
  }

  // pauseQueue pauses the queue until resumed, or resumes it.
  async function pauseQueue(pause) {
    await ctx.act(async () => {
      await call('POST', `${base}/${pause ? 'pause' : 'resume'}`, {});
      ctx.notice(pause ? `Paused queue ${queue}: it hands out nothing until resumed.` : `Resumed queue ${queue}.`);
      await ctx.refresh();
    });
  }

  async function kickAll() {
    await ctx.act(async () => {
      const res = await call('POST', `${base}/dead:kick`);
      ctx.notice(`Kicked ${plural(res.kicked, 'dead task')}: ready again.`);
      await ctx.refresh();
    });
  }

  async function deleteAll(n) {
    if (!await confirmAction('Delete every dead task?', `Delete all ${plural(n, 'dead task')} of queue “${queue}”? This cannot be undone.`, 'Delete all dead')) return;
    await ctx.act(async () => {
      const res = await call('DELETE', `${base}/dead`);
      ctx.notice(`Deleted ${plural(res.deleted, 'dead task')}.`);
      await ctx.refresh();
    });
  }

  // searching reports whether a search is applied.
  const searching = () => !!(search.error || search.id_prefix);

  // filter is the search and the state listed, as the bulk routes take it.
  function filter() {
    const f = {...search};
    if (shown !== 'all') f.state = shown;
    return f;
  }

  function applySearch(ev) {
    ev.preventDefault();
    search = {error: searchError.value, id_prefix: searchPrefix.value.trim()};
    pages = [''];
    ctx.refresh();
  }

  function clearSearch() {
    searchError.value = searchPrefix.value = '';
    search = {error: '', id_prefix: ''};
    pages = [''];
    ctx.refresh();
  }

  // actOnMatching does action (kick, retry or delete) on every task the
  // search matches in the state listed, after a dry run counts them and
  // the operator confirms.
  async function actOnMatching(action, label) {
    await ctx.act(async () => {
      const f = filter();
      const dry = await call('POST', `${base}/tasks:${action}`, {...f, dry_run: true});
      if (!dry.matched) {
        ctx.notice('No task matches the search.');
        return;
      }
      if (!await confirmAction(`${label} every task matched?`,
        `${label} the ${plural(dry.matched, 'task')} of queue “${queue}” that the search matches${f.state ? ` (${f.state})` : ''}?` +
        (action === 'delete' ? ' This cannot be undone.' : ''), `${label} ${count(dry.matched)}`)) return;
      const res = await call('POST', `${base}/tasks:${action}`, f);
      ctx.notice(`${label}: ${plural(res.changed, 'task')} of ${count(res.matched)} matched.`);
      await ctx.refresh();
    });
  }

  // select lists another state from its first page; the hash follows,
  // without a new entry in the history.
  function select(st) {
    shown = st;
    pages = [''];
    history.replaceState(null, '', `#/queues/${encodeURIComponent(queue)}/${st}`);
    ctx.refresh();
  }

  function turn(to) {
    if (to === 'next' && next) pages.push(next);
    else if (to === 'prev' && pages.length > 1) pages.pop();
    else if (to === 'first') pages = [''];
    ctx.refresh();
  }

  function row(t) {
    return h('tr', {'data-id': t.id, 'data-state': t.state},
      h('th', {scope: 'row'}, h('button', {type: 'button', class: 'link', 'data-key': 'show:' + t.id, 'aria-label': `Show task ${t.id}`,
        onclick: () => ctx.act(() => open(t.id))}, t.id)),
      h('td', {class: 'num'}, String(t.job_id)),
      h('td', {}, h('span', {class: 'state state-' + t.state}, t.state)),
      h('td', {}, timeEl(t.due)),
      h('td', {class: 'num'}, String(t.priority)),
      h('td', {class: 'num'}, t.max_attempts ? `${t.attempts} of ${t.max_attempts}` : String(t.attempts)),
      h('td', {class: 'note'},
        t.lease_expires ? h('span', {class: 'lease'}, 'Lease ends ', timeEl(t.lease_expires)) : null,
        t.last_error ? h('span', {class: 'last-error', title: t.last_error}, t.last_error) : null),
      h('td', {class: 'actions'},
        t.state === 'dead' ? h('button', {type: 'button', 'data-key': 'kick:' + t.id, 'aria-label': `Kick task ${t.id}`, onclick: () => kick(t.id)}, 'Kick') : null,
        h('button', {type: 'button', class: 'danger', 'data-key': 'del:' + t.id, 'aria-label': `Delete task ${t.id}`, onclick: () => remove(t.id)}, 'Delete')));
  }

  return {
    title: 'Queue ' + queue,
    async refresh() {
      let q = `state=${shown === 'all' ? '' : shown}&after=${encodeURIComponent(pages.at(-1))}&limit=${pageSize}`;
      if (searching()) q += `&error=${encodeURIComponent(search.error)}&id_prefix=${encodeURIComponent(search.id_prefix)}`;
      const [stats, list, dueHist, all, keys] = await Promise.all([
        queueStats(),
        call('GET', `${base}/tasks?${q}`),
        atMostEvery('due:' + queue, dueEvery, () => call('GET', `/v1/stats/due?queue=${encodeURIComponent(queue)}&width=1m&n=60`)),
        call('GET', '/v1/queues'),
        call('GET', `${base}/keys?limit=${keysShown}`),
        finished.refresh(),
      ]);
      swap(keysBody, keysView(keys));
      const info = all.queues.find((x) => x.name === queue) || {};
      pauseLine.textContent = !info.paused ? 'Not paused: tasks are handed out.'
        : info.paused_until ? '' : 'Paused until resumed: puts go on, nothing is handed out.';
      if (info.paused && info.paused_until) pauseLine.append('Paused until ', timeEl(info.paused_until), ': puts go on, nothing is handed out.');
      pauseLine.dataset.paused = String(!!info.paused);
      swap(pauseButtons, info.paused
        ? h('button', {type: 'button', 'data-key': 'resume', onclick: () => pauseQueue(false)}, 'Resume')
        : h('button', {type: 'button', 'data-key': 'pause', onclick: () => pauseQueue(true)}, 'Pause'));
      swap(policyBody, policyView(info.policy));
      const c = stats.queues.find((x) => x.name === queue) ||
        {delayed: 0, ready: 0, reserved: 0, dead: 0, putRate: null, deliveryRate: null};
      const n = {all: c.delayed + c.ready + c.reserved + c.dead, delayed: c.delayed, ready: c.ready, reserved: c.reserved, dead: c.dead};
      // A push queue's deliveries are its pushes: the pusher reserves
      // each task it posts, so each push (acked or failed) counts once.
      const push = !!info.policy?.push;
      swap(counts, [['Delayed', count(c.delayed), 'delayed'], ['Ready', count(c.ready), 'ready'], ['Reserved', count(c.reserved), 'reserved'],
        ['Dead', count(c.dead), 'dead'], ['Puts', rate(c.putRate), 'puts'],
        [push ? 'Pushes' : 'Deliveries', rate(c.deliveryRate), 'deliveries', push ? 'Pushes per second to the endpoint, answered or failed' : 'Tasks handed to reservers per second']]
        .map(([k, v, key, title]) => h('div', {'data-count': key, title: title || null}, h('dt', {}, k), h('dd', {}, v))));
      swap(tabs, states.map((st) => h('button', {type: 'button', 'aria-pressed': String(st === shown), 'data-key': 'tab:' + st, 'data-state': st,
        onclick: () => select(st)}, title(st), h('span', {class: 'n'}, ` (${count(n[st])})`))));
      swap(bulk, searching() ? [
        h('button', {type: 'button', 'data-key': 'kick-matching', onclick: () => actOnMatching('kick', 'Kick')}, 'Kick matching dead'),
        h('button', {type: 'button', 'data-key': 'retry-matching', onclick: () => actOnMatching('retry', 'Retry')}, 'Retry matching'),
        h('button', {type: 'button', class: 'danger', 'data-key': 'delete-matching', onclick: () => actOnMatching('delete', 'Delete')}, 'Delete matching'),
      ] : shown === 'dead' && c.dead > 0 ? [
        h('button', {type: 'button', 'data-key': 'kick-all', onclick: () => kickAll()}, `Kick all ${count(c.dead)} dead`),
        h('button', {type: 'button', class: 'danger', 'data-key': 'delete-all', onclick: () => deleteAll(c.dead)}, `Delete all ${count(c.dead)} dead`),
      ] : []);
      next = list.next;
      caption.textContent = `${shown === 'all' ? 'Tasks' : title(shown) + ' tasks'}${searching() ? ' matching the search' : ''}, page ${pages.length}, in due order`;
      const none = next ? 'None on this page; the next page may have some.'
        : pages.length > 1 ? 'No more tasks.' : `No ${shown === 'all' ? '' : shown + ' '}tasks.`;
      swap(tbody, list.tasks.length ? list.tasks.map(row) : h('tr', {}, h('td', {colspan: 8}, none)));
      stack(table);
      pageNote.textContent = `Page ${pages.length}${list.tasks.length ? `: ${plural(list.tasks.length, 'task')}` : ''}${next ? '; more follow' : ''}.`;
      swap(pager,
        h('button', {type: 'button', 'data-key': 'first', disabled: pages.length === 1, onclick: () => turn('first')}, 'First page'),
        h('button', {type: 'button', 'data-key': 'prev', disabled: pages.length === 1, onclick: () => turn('prev')}, 'Previous page'),
        h('button', {type: 'button', 'data-key': 'next', disabled: !next, onclick: () => turn('next')}, 'Next page'));
      dueFigure(due, dueHist, ' in this queue');
    },
  };
}

// keysView shows the busiest keys of a queue (api.KeysResponse) as a
// table, or says that its tasks have none.
function keysView(k) {
  if (!k.keys.some((x) => x.key !== '')) return h('p', {class: 'hint'}, 'No task of this queue has a key: reserves take its tasks in priority order.');
  return h('div', {class: 'scroll', role: 'region', 'aria-labelledby': 'keys-h', tabindex: 0},
    h('table', {id: 'keys-table'},
      h('caption', {}, `The busiest keys${k.next ? ` (the first ${keysShown})` : ''}; reserves take the keys' ready tasks in turn`),
      h('thead', {}, h('tr', {}, ['Key', 'Ready', 'Reserved', 'Delayed'].map((c) => h('th', {scope: 'col', class: c === 'Key' ? null : 'num'}, c)))),
      h('tbody', {}, k.keys.map((x) => h('tr', {'data-task-key': x.key},
        h('th', {scope: 'row'}, x.key === '' ? h('span', {class: 'hint'}, '(none)') : x.key),
        h('td', {class: 'num'}, count(x.ready)), h('td', {class: 'num'}, count(x.reserved)), h('td', {class: 'num'}, count(x.delayed)))))));
}

// policyView shows a queue's policy (api.Policy) as a list of its fields,
// or says that the queue has the default one.
function policyView(p) {
  if (!p) return h('p', {class: 'hint'}, 'Default policy: a failed task comes back after 1s, twice as long each attempt up to 1h (± 10%), and is dead after 25 attempts; puts take the server\'s defaults, nothing is limited, a dead task stays here.');
  const ms = (d) => duration(parseDuration(d));
  const rows = [];
  if (p.retry) {
    const r = p.retry;
    rows.push(['Retry', parseDuration(r.initial) === 0 ? 'at once'
      : `after ${ms(r.initial)}, × ${r.multiplier} each attempt, up to ${ms(r.max)}` + (r.jitter ? `, ± ${Math.round(r.jitter * 100)}%` : '')]);
  } else {
    rows.push(['Retry', 'after 1s, × 2 each attempt, up to 1h, ± 10% (the default)']);
  }
  rows.push(['Max attempts', p.max_attempts < 0 ? 'no limit' : p.max_attempts ? String(p.max_attempts) : '25 (the default)']);
  if (p.ttr) rows.push(['Lease (ttr)', ms(p.ttr)]);
  if (p.rate) rows.push(['Rate', `${count(p.rate.limit)} per ${ms(p.rate.per)}` + (p.rate.burst && p.rate.burst !== p.rate.limit ? `, bursts of ${count(p.rate.burst)}` : '')]);
  if (p.concurrency) rows.push(['Concurrency', `at most ${plural(p.concurrency, 'task')} reserved at once`]);
  if (p.dead_letter) rows.push(['Dead letter', h('a', {href: `#/queues/${encodeURIComponent(p.dead_letter)}/all`}, p.dead_letter)]);
  if (p.push) {
    // The headers' values are not shown: they may hold credentials.
    const names = Object.keys(p.push.headers || {}).sort();
    rows.push(['Push endpoint', h('span', {class: 'mono'}, p.push.url)]);
    rows.push(['Push timeout', p.push.timeout ? ms(p.push.timeout) : '30 s (the default)']);
    rows.push(['Push headers', names.length ? names.join(', ') : 'none']);
    rows.push(['Push secret', p.push.secret_set ? 'set: pushes are signed' : 'none: pushes are not signed']);
  }
  return h('dl', {class: 'fields', 'data-policy': ''}, rows.map(([k, v]) => h('div', {'data-field': k}, h('dt', {}, k), h('dd', {}, v))));
}
