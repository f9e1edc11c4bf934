// The two dialogs of index.html: a confirmation before deleting, and a
// task's details with its payload. Both are modal <dialog>s: the focus
// stays inside, Escape closes them, and closing gives the focus back to
// what opened them (or, if that was redrawn meanwhile, to its twin of the
// same data-key).

import {call, parse, seg} from './api.js';
import {h, timeEl, duration, parseDuration} from './dom.js';

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

// showTask reads a task and shows it with its payload in the task dialog;
// actions(task, close) builds the buttons to offer beside Close. It
// throws the API's error (404 when there is no such task).
export async function showTask(queue, id, actions) {
  const text = await call('GET', `/v1/queues/${seg(queue)}/tasks/${seg(id)}`, undefined, {raw: true});
  const t = parse(text);
  const dlg = document.getElementById('task');
  document.getElementById('task-title').textContent = 'Task ' + t.id;
  const row = (k, v) => h('div', {}, h('dt', {}, k), h('dd', {}, v));
  const max = t.max_attempts ? ` of ${t.max_attempts}` : ' (no limit)';
  document.getElementById('task-body').replaceChildren(
    h('dl', {class: 'fields'},
      row('Queue', t.queue),
      row('State', h('span', {class: 'state state-' + t.state, 'data-state': t.state}, t.state)),
      row('Job id', String(t.job_id)),
      row('Due', timeEl(t.due)),
      row('Priority', String(t.priority) + ' (lower first)'),
      row('Attempts', String(t.attempts) + max),
      row('Lease (ttr)', duration(parseDuration(t.ttr))),
      t.lease_expires ? row('Lease ends', timeEl(t.lease_expires)) : null,
      t.last_error ? row('Last error', h('span', {class: 'last-error', 'data-field': 'last_error'}, t.last_error)) : null,
      row('Created', timeEl(t.created))),
    h('h3', {}, 'Payload'),
    t.payload === null || t.payload === undefined
      ? h('p', {class: 'hint'}, 'No payload.')
      : h('pre', {class: 'payload', tabindex: 0, 'aria-label': 'Payload'}, JSON.stringify(t.payload, null, 2)),
    h('div', {class: 'buttons'}, actions(t, () => dlg.close())));
  if (!dlg.open) {
    const opener = document.activeElement;
    dlg.addEventListener('close', () => setTimeout(() => giveBack(opener), 50), {once: true});
    dlg.showModal();
  }
  document.getElementById('task-close').focus();
  return t;
}
