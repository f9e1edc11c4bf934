// The two dialogs of index.html: a confirmation before deleting, and a
// task's details with its attempts and payload, or a finished task's
// with its attempts, or a schedule's runs. Both are modal <dialog>s: the focus
// stays inside, Escape closes them, and closing gives the focus back to
// what opened them (or, if that was redrawn meanwhile, to its twin of the
// same data-key).

import {call, parse, seg, ApiError, AuthError} from './api.js';
import {h, timeEl, duration, parseDuration} from './dom.js';
import {attemptsPath, attemptsView} from './history.js';

// giveBack returns the focus to opener after a dialog closes, unless the
// focus has gone somewhere meanwhile (another page, another dialog).
function giveBack(opener) {
  const now = document.activeElement;
  if (!opener || document.querySelector('dialog[open]') || (now && now !== document.body && now !== opener)) return;
  if (opener.isConnected && !opener.disabled) {
    opener.focus();
    return;
  }
  const key = opener.dataset && opener.dataset.key;
  const twin = key && document.querySelector(`main [data-key="${CSS.escape(key)}"]`);
  (twin || document.querySelector('main h1'))?.focus();
}

// confirmAction asks before a destructive action and answers true when
// the reader confirms. Cancel has the focus at first.
export function confirmAction(title, text, ok) {
  const dlg = document.getElementById('confirm');
  document.getElementById('confirm-title').textContent = title;
  document.getElementById('confirm-text').textContent = text;
  document.getElementById('confirm-ok').textContent = ok;
  const opener = document.activeElement;
  dlg.returnValue = '';
  dlg.showModal();
  document.getElementById('confirm-cancel').focus();
  return new Promise((resolve) => {
    dlg.addEventListener('close', () => {
      resolve(dlg.returnValue === 'ok');
      // The action may redraw what opened the dialog: give the focus
      // back once it has.
      setTimeout(() => giveBack(opener), 50);
    }, {once: true});
  });
}

// attempts reads a task's attempts and answers them as attemptsView
// shows them. A task gone meanwhile (404), or another error but the
// token's, answers a hint instead: the rest of the dialog still shows.
async function attempts(queue, id) {
  try {
    const res = await call('GET', attemptsPath(queue, id));
    return attemptsView(res.attempts);
  } catch (e) {
    if (!(e instanceof ApiError) || e instanceof AuthError) throw e;
    return h('p', {class: 'hint', id: 'attempts-none'},
      e.status === 404 ? 'Its attempts are no longer kept.' : `Its attempts could not be read (${e.message}).`);
  }
}

const row = (k, v) => h('div', {}, h('dt', {}, k), h('dd', {}, v));

// showTask reads a task and shows it with its attempts and payload in the
// task dialog; actions(task, close) builds the buttons to offer beside
// Close; a task that finished, its finished record (showFinished). It
// throws the API's error (404 when there is no such task).
export async function showTask(queue, id, actions) {
  const [text, tried] = await Promise.all([
    call('GET', `/v1/queues/${seg(queue)}/tasks/${seg(id)}`, undefined, {raw: true}),
    attempts(queue, id),
  ]);
  const t = parse(text);
  if (t.state === 'finished') {
    // No live task of this id: the server answered its finished record
    // (api.FinishedRecord), which the history keeps.
    await showFinished(queue, t);
    return t;
  }
  const dlg = document.getElementById('task');
  const max = t.max_attempts ? ` of ${t.max_attempts}` : ' (no limit)';
  present('Task ' + t.id,
    h('dl', {class: 'fields'},
      row('Queue', t.queue),
      row('State', h('span', {class: 'state state-' + t.state, 'data-state': t.state}, t.state)),
      row('Job id', String(t.job_id)),
      t.key ? row('Key', h('span', {'data-field': 'key'}, t.key)) : null,
      row('Due', timeEl(t.due)),
      row('Priority', String(t.priority) + ' (lower first)'),
      row('Attempts', String(t.attempts) + max),
      row('Lease (ttr)', duration(parseDuration(t.ttr))),
      t.lease_expires ? row('Lease ends', timeEl(t.lease_expires)) : null,
      t.last_error ? row('Last error', h('span', {class: 'last-error', 'data-field': 'last_error'}, t.last_error)) : null,
      row('Created', timeEl(t.created))),
    h('h3', {}, 'Attempts'),
    tried,
    h('h3', {}, 'Payload'),
    t.payload === null || t.payload === undefined
      ? h('p', {class: 'hint'}, 'No payload.')
      : h('pre', {class: 'payload', tabindex: 0, 'aria-label': 'Payload'}, JSON.stringify(t.payload, null, 2)),
    h('div', {class: 'buttons'}, actions(t, () => dlg.close())));
  return t;
}

// showFinished shows a task of a queue's history (api.FinishedTask) with
// its attempts in the task dialog. The history keeps no payload, and the
// attempts the server answers for an id are its newest task's.
export async function showFinished(queue, f) {
  const tried = await attempts(queue, f.id);
  present('Task ' + f.id,
    h('dl', {class: 'fields'},
      row('Queue', queue),
      row('Outcome', h('span', {class: 'outcome outcome-' + f.outcome, 'data-field': 'outcome'}, f.outcome)),
      row('Job id', String(f.job_id)),
      row('Finished', timeEl(f.finished)),
      row('Attempts', String(f.attempts)),
      f.last_error ? row('Last error', h('span', {class: 'last-error', 'data-field': 'last_error'}, f.last_error)) : null),
    h('h3', {}, 'Attempts'),
    tried,
    h('p', {class: 'hint'}, 'A finished task keeps no payload. The attempts are those of the newest task of this id.'));
}

// showRuns reads a schedule's newest runs (GET
// /v1/schedules/NAME/runs) and shows them in the task dialog: each
// occurrence's time in the schedule's zone, its task and its outcome.
export async function showRuns(sch, zone) {
  const res = await call('GET', `/v1/schedules/${seg(sch.name)}/runs?limit=20`);
  const table = h('table', {class: 'data', id: 'runs'},
    h('caption', {}, 'Newest occurrences with a task, newest first'),
    h('thead', {}, h('tr', {}, ['Occurrence', 'Task', 'Outcome', 'Finished'].map((c) => h('th', {scope: 'col'}, c)))),
    h('tbody', {}, res.runs.length ? res.runs.map((r) => h('tr', {'data-outcome': r.outcome},
      h('td', {}, timeEl(r.time, false, zone)),
      h('td', {class: 'mono'}, r.task_id || '—'),
      h('td', {}, h('span', {class: 'tag outcome-' + r.outcome}, r.outcome), r.state ? ` (${r.state})` : ''),
      h('td', {}, r.finished ? timeEl(r.finished) : '—')))
      : h('tr', {}, h('td', {colspan: 4}, 'No occurrence has a task the server still knows.'))));
  present('Runs of ' + sch.name, h('div', {class: 'scroll'}, table),
    h('p', {class: 'hint'}, 'Occurrences without a task (missed, paused, or past the history\'s retention) and runs put by “Run now” are not listed.'));
}

// present shows the task dialog with a title and body, modal, giving the
// focus to Close; it stays open when it was (a dialog redrawn).
function present(title, ...body) {
  const dlg = document.getElementById('task');
  document.getElementById('task-title').textContent = title;
  document.getElementById('task-body').replaceChildren(...body.filter((n) => n !== null && n !== undefined));
  if (!dlg.open) {
    const opener = document.activeElement;
    dlg.addEventListener('close', () => setTimeout(() => giveBack(opener), 50), {once: true});
    dlg.showModal();
  }
  document.getElementById('task-close').focus();
}
