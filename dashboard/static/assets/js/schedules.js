// #/schedules: every cron schedule with its rules, its next five times
// and its last occurrence (with its task's outcome), each time in the
// schedule's zone, buttons to run one now, to show its runs (dialogs.js
// showRuns) and to pause or resume it, and a form to add or edit one whose cron
// line the server's own parser checks as it is typed (POST /v1/cron:check).

import {call, seg, ApiError, AuthError} from './api.js';
import {h, swap, stack, timeEl, now} from './dom.js';
import {confirmAction, showRuns} from './dialogs.js';

// nextTimes caches cron:check answers by line and zone until the first
// of their times has passed.
const nextTimes = new Map();

async function checkCron(cron, timezone) {
  const key = cron + '\n' + timezone;
  const hit = nextTimes.get(key);
  if (hit && (hit.next.length === 0 || Date.parse(hit.next[0]) > now())) return hit;
  const res = await call('POST', '/v1/cron:check', timezone ? {cron, timezone} : {cron});
  nextTimes.set(key, res);
  return res;
}

// The server's default priority (api.DefaultPriority).
const defaultPriority = 1024;

// rules says in words what a schedule does beyond its line: its misfire
// and overlap rules and its tasks' options; only what differs from the
// defaults, but the misfire rule always.
function rules(sch) {
  const out = [];
  if (sch.misfire === 'skip') out.push('missed: none');
  else if (sch.misfire === 'all') out.push(`missed: all within ${sch.catch_up}`);
  else out.push('missed: the newest once');
  if (sch.overlap === 'skip') out.push('skips while the last task runs');
  if (sch.priority !== undefined && sch.priority !== defaultPriority) out.push(`priority ${sch.priority}`);
  if (sch.ttr) out.push(`ttr ${sch.ttr}`);
  if (sch.max_attempts) out.push(`at most ${sch.max_attempts} attempts`);
  return h('ul', {class: 'rules'}, out.map((r) => h('li', {}, r)));
}

// lastEl shows a schedule's newest occurrence: its time, its task (a link
// to the task's queue) and the task's outcome.
function lastEl(sch) {
  const l = sch.last;
  if (!l) return h('span', {class: 'hint'}, 'none yet');
  return h('span', {class: 'last', 'data-outcome': l.outcome},
    timeEl(l.time, true, zoneOf(sch)),
    h('span', {class: 'tag outcome-' + l.outcome}, l.outcome),
    l.task_id ? h('span', {class: 'task-id mono'}, ' ', h('a', {href: '#/queues/' + encodeURIComponent(sch.queue)}, l.task_id)) : null);
}

// zoneOf is the zone a schedule's times are shown in: its own.
function zoneOf(sch) {
  return sch.timezone || 'UTC';
}

// timesList shows a schedule's next times in its zone (zone), each
// labelled with it.
function timesList(next, zone) {
  if (!next.length) return h('span', {class: 'hint'}, 'never again');
  return h('ol', {class: 'times'}, next.map((t) => h('li', {}, timeEl(t, false, zone))));
}

export function enter(main, params, ctx) {
  const tbody = h('tbody');
  const empty = h('p', {class: 'hint', hidden: true}, 'No schedules yet: add one below.');
  let table;
  let editing = null; // the name of the schedule in the form; null: adding

  const field = (id, label, input, help) => h('div', {class: 'field'}, h('label', {for: id}, label), input, help || null);
  const name = h('input', {id: 's-name', name: 'name', required: true, autocomplete: 'off', spellcheck: 'false',
    maxlength: 179, 'aria-describedby': 's-name-help'});
  const cron = h('input', {id: 's-cron', name: 'cron', required: true, autocomplete: 'off', spellcheck: 'false',
    'aria-describedby': 's-cron-help s-cron-check', class: 'mono'});
  const cronCheck = h('div', {id: 's-cron-check', class: 'check', 'aria-live': 'polite'});
  const zone = h('input', {id: 's-zone', name: 'timezone', list: 's-zones', autocomplete: 'off', spellcheck: 'false',
    placeholder: 'UTC', 'aria-describedby': 's-zone-help'});
  const zones = h('datalist', {id: 's-zones'},
    (Intl.supportedValuesOf ? Intl.supportedValuesOf('timeZone') : []).map((z) => h('option', {value: z})));
  const queue = h('input', {id: 's-queue', name: 'queue', required: true, autocomplete: 'off', spellcheck: 'false', maxlength: 200});
  const payload = h('textarea', {id: 's-payload', name: 'payload', rows: 3, spellcheck: 'false', class: 'mono',
    'aria-describedby': 's-payload-help'});
  const option = (value, text) => h('option', {value}, text);
  const misfire = h('select', {id: 's-misfire', name: 'misfire', 'aria-describedby': 's-misfire-help'},
    option('one', 'Put the newest once'), option('skip', 'Put none'), option('all', 'Put every one'));
  const catchUp = h('input', {id: 's-catchup', name: 'catch_up', autocomplete: 'off', spellcheck: 'false', placeholder: '24h',
    'aria-describedby': 's-catchup-help'});
  const overlap = h('select', {id: 's-overlap', name: 'overlap', 'aria-describedby': 's-overlap-help'},
    option('allow', 'Put it anyway'), option('skip', 'Skip the occurrence'));
  const priority = h('input', {id: 's-priority', name: 'priority', inputmode: 'numeric', autocomplete: 'off', placeholder: String(defaultPriority)});
  const ttr = h('input', {id: 's-ttr', name: 'ttr', autocomplete: 'off', spellcheck: 'false', placeholder: 'the queue\'s',
    'aria-describedby': 's-ttr-help'});
  const maxAttempts = h('input', {id: 's-max-attempts', name: 'max_attempts', inputmode: 'numeric', autocomplete: 'off',
    placeholder: 'the queue\'s'});
  const paused = h('input', {id: 's-paused', name: 'paused', type: 'checkbox'});
  const more = h('details', {id: 's-more'}, h('summary', {}, 'Missed occurrences, overlap and task options'),
    field('s-misfire', 'Occurrences missed while no server ran', misfire, h('p', {id: 's-misfire-help', class: 'hint'},
      'After a restart: put the newest missed occurrence once (the default), none, or every one within the catch-up window.')),
    field('s-catchup', 'Catch-up window (with “every one”)', catchUp, h('p', {id: 's-catchup-help', class: 'hint'},
      'How far back to put missed occurrences, such as 6h; at most 1,000 are put.')),
    field('s-overlap', 'When the last occurrence\'s task is not finished', overlap, h('p', {id: 's-overlap-help', class: 'hint'},
      'Skipped occurrences are counted and shown as the last one.')),
    field('s-priority', 'Priority of its tasks (optional)', priority),
    field('s-ttr', 'Time to run of its tasks (optional)', ttr, h('p', {id: 's-ttr-help', class: 'hint'}, 'A lease such as 30s or 5m.')),
    field('s-max-attempts', 'Attempts of its tasks (optional)', maxAttempts),
    h('div', {class: 'field check-field'}, paused, h('label', {for: 's-paused'}, 'Paused: puts nothing until resumed')));
  const inputs = [name, cron, zone, queue, payload, misfire, catchUp, overlap, priority, ttr, maxAttempts];
  const error = h('p', {id: 's-error', class: 'error', role: 'alert'});
  const submit = h('button', {type: 'submit', id: 's-submit'}, 'Add schedule');
  const cancel = h('button', {type: 'button', class: 'quiet', hidden: true, onclick: () => reset()}, 'Cancel editing');
  const formHeading = h('h2', {id: 'form-h', tabindex: -1}, 'Add a schedule');
  const form = h('form', {id: 'schedule-form', novalidate: true, onsubmit: save},
    field('s-name', 'Name', name, h('p', {id: 's-name-help', class: 'hint'},
      'Letters, digits, “.”, “_” and “-”. Each occurrence puts a task with the id NAME@TIME.')),
    field('s-cron', 'Cron line', cron, h('p', {id: 's-cron-help', class: 'hint'},
      'Five fields: minute, hour, day of month, month, day of week (“*/5 * * * *”), or a descriptor (“@hourly”, “@every 90s”).')),
    cronCheck,
    field('s-zone', 'Time zone (optional)', zone, h('p', {id: 's-zone-help', class: 'hint'}, 'An IANA zone such as Europe/Paris; empty: UTC.')),
    zones,
    field('s-queue', 'Queue', queue),
    field('s-payload', 'Payload (optional JSON)', payload, h('p', {id: 's-payload-help', class: 'hint'},
      'Put as each task\'s payload, such as {"report": "daily"}.')),
    more,
    error,
    h('div', {class: 'buttons'}, submit, cancel));

  main.append(
    h('h1', {tabindex: -1}, 'Schedules'),
    h('section', {'aria-labelledby': 'list-h'},
      h('h2', {id: 'list-h'}, 'Cron schedules'),
      empty,
      h('div', {class: 'scroll', role: 'region', 'aria-labelledby': 'list-h', tabindex: 0},
        table = h('table', {id: 'schedules'},
          h('thead', {}, h('tr', {}, ['Name', 'Cron line', 'Zone', 'Queue', 'Rules', 'Next five times', 'Last', 'Actions']
            .map((c) => h('th', {scope: 'col'}, c)))),
          tbody))),
    h('section', {'aria-labelledby': 'form-h', class: 'form-section'}, formHeading, form));

  // The cron line is checked as it is typed, a quarter second after the
  // last key; answers for older lines are dropped.
  let seq = 0;
  let debounce = 0;
  function check() {
    clearTimeout(debounce);
    const line = cron.value.trim();
    const tz = zone.value.trim();
    const mine = ++seq;
    cron.removeAttribute('aria-invalid');
    zone.removeAttribute('aria-invalid');
    if (!line) {
      cronCheck.className = 'check';
      cronCheck.replaceChildren();
      return;
    }
    debounce = setTimeout(async () => {
      try {
        const res = await checkCron(line, tz);
        if (mine !== seq) return;
        cronCheck.className = 'check ok';
        cronCheck.replaceChildren(h('span', {}, res.next.length ? '✓ Valid. Next times: ' : '✓ Valid, but it never fires again.'), timesList(res.next, tz || 'UTC'));
      } catch (e) {
        if (mine !== seq) return;
        if (e instanceof AuthError) {
          ctx.login(e.message);
          return;
        }
        const bad = e instanceof ApiError && e.status === 400;
        if (bad) (/zone/i.test(e.message) ? zone : cron).setAttribute('aria-invalid', 'true');
        cronCheck.className = 'check bad';
        cronCheck.replaceChildren(h('span', {}, bad ? '✗ Not valid: ' : 'Could not check: '), h('span', {class: 'msg'}, e.message));
      }
    }, 250);
  }
  cron.addEventListener('input', check);
  zone.addEventListener('input', check);

  function reset() {
    editing = null;
    form.reset();
    name.readOnly = false;
    formHeading.textContent = 'Add a schedule';
    submit.textContent = 'Add schedule';
    cancel.hidden = true;
    error.textContent = '';
    more.open = false;
    for (const el of inputs) el.removeAttribute('aria-invalid');
    check();
  }

  function edit(sch) {
    editing = sch.name;
    name.value = sch.name;
    name.readOnly = true;
    cron.value = sch.cron;
    zone.value = sch.timezone || '';
    queue.value = sch.queue;
    payload.value = sch.payload === undefined || sch.payload === null ? '' : JSON.stringify(sch.payload, null, 2);
    misfire.value = sch.misfire || 'one';
    catchUp.value = sch.misfire === 'all' ? sch.catch_up : '';
    overlap.value = sch.overlap || 'allow';
    priority.value = sch.priority !== undefined && sch.priority !== defaultPriority ? String(sch.priority) : '';
    ttr.value = sch.ttr || '';
    maxAttempts.value = sch.max_attempts ? String(sch.max_attempts) : '';
    paused.checked = !!sch.paused;
    more.open = misfire.value !== 'one' || overlap.value !== 'allow' || !!(priority.value || ttr.value || maxAttempts.value) || paused.checked;
    formHeading.textContent = `Edit schedule ${sch.name}`;
    submit.textContent = 'Save changes';
    cancel.hidden = false;
    error.textContent = '';
    check();
    formHeading.focus();
  }

  // invalid marks a field and says why in the form's alert.
  function invalid(el, msg) {
    el.setAttribute('aria-invalid', 'true');
    error.textContent = msg;
    el.focus();
  }

  async function save(ev) {
    ev.preventDefault();
    error.textContent = '';
    for (const el of inputs) el.removeAttribute('aria-invalid');
    const n = name.value.trim();
    if (!n) return invalid(name, 'Give the schedule a name.');
    if (!cron.value.trim()) return invalid(cron, 'Give a cron line.');
    if (!queue.value.trim()) return invalid(queue, 'Give the queue its tasks go to.');
    const p = payload.value.trim();
    if (p) {
      try {
        JSON.parse(p);
      } catch (e) {
        return invalid(payload, 'The payload is not JSON: ' + e.message);
      }
    }
    // The body is built as text, so that the payload goes as it was typed.
    const parts = [`"cron":${JSON.stringify(cron.value.trim())}`, `"queue":${JSON.stringify(queue.value.trim())}`];
    if (zone.value.trim()) parts.push(`"timezone":${JSON.stringify(zone.value.trim())}`);
    if (p) parts.push(`"payload":${p}`);
    // The task options go as typed, so that the server's checks name
    // them; a number that is not one is refused here.
    if (misfire.value !== 'one') parts.push(`"misfire":${JSON.stringify(misfire.value)}`);
    if (catchUp.value.trim()) parts.push(`"catch_up":${JSON.stringify(catchUp.value.trim())}`);
    if (overlap.value !== 'allow') parts.push(`"overlap":${JSON.stringify(overlap.value)}`);
    for (const [el, key, what] of [[priority, 'priority', 'The priority'], [maxAttempts, 'max_attempts', 'The attempts']]) {
      const v = el.value.trim();
      if (!v) continue;
      if (!/^[0-9]+$/.test(v)) {
        more.open = true;
        return invalid(el, `${what} must be a whole number.`);
      }
      parts.push(`"${key}":${v}`);
    }
    if (ttr.value.trim()) parts.push(`"ttr":${JSON.stringify(ttr.value.trim())}`);
    if (paused.checked) parts.push('"paused":true');
    const was = editing;
    await ctx.act(async () => {
      try {
        await call('PUT', `/v1/schedules/${seg(n)}`, '{' + parts.join(',') + '}');
      } catch (e) {
        if (!(e instanceof ApiError) || e.status !== 400) throw e;
        const m = e.message;
        const el = /misfire/i.test(m) ? misfire : /catch_up/i.test(m) ? catchUp : /overlap/i.test(m) ? overlap
          : /priority/i.test(m) ? priority : /ttr/i.test(m) ? ttr : /max_attempts/i.test(m) ? maxAttempts
          : /zone/i.test(m) ? zone : /schedule name/i.test(m) ? name : /queue/i.test(m) ? queue : /payload|json/i.test(m) ? payload : cron;
        if (more.contains(el)) more.open = true;
        invalid(el, 'The server refused the schedule: ' + m);
        return;
      }
      ctx.notice(was ? `Saved schedule ${n}.` : `Added schedule ${n}.`);
      reset();
      await ctx.refresh();
    });
  }

  // runNow puts a task of the schedule now; pauseOrResume flips it.
  async function runNow(sch) {
    await ctx.act(async () => {
      const t = await call('POST', `/v1/schedules/${seg(sch.name)}/run`);
      ctx.notice(`Put task ${t.id} into ${t.queue || sch.queue}.`);
      await ctx.refresh();
    });
  }

  async function pauseOrResume(sch) {
    await ctx.act(async () => {
      await call('POST', `/v1/schedules/${seg(sch.name)}/${sch.paused ? 'resume' : 'pause'}`);
      ctx.notice(sch.paused ? `Resumed schedule ${sch.name} from now.` : `Paused schedule ${sch.name}.`);
      await ctx.refresh();
    });
  }

  async function remove(sch) {
    if (!await confirmAction('Delete the schedule?', `Delete schedule “${sch.name}”? Tasks it has put stay.`, 'Delete schedule')) return;
    await ctx.act(async () => {
      try {
        await call('DELETE', `/v1/schedules/${seg(sch.name)}`);
      } catch (e) {
        if (!(e instanceof ApiError && e.status === 404)) throw e;
      }
      if (editing === sch.name) reset();
      ctx.notice(`Deleted schedule ${sch.name}.`);
      await ctx.refresh();
    });
  }

  return {
    title: 'Schedules',
    async refresh() {
      const res = await call('GET', '/v1/schedules');
      const list = res.schedules;
      const times = await Promise.all(list.map((sch) => checkCron(sch.cron, sch.timezone || '').then((r) => r.next, (e) => {
        if (e instanceof AuthError) throw e;
        return e;
      })));
      empty.hidden = list.length > 0;
      swap(tbody, list.map((sch, i) => h('tr', {'data-name': sch.name, 'data-paused': String(!!sch.paused)},
        h('th', {scope: 'row'}, sch.name, sch.paused ? h('span', {class: 'tag paused'}, 'paused') : null),
        h('td', {class: 'mono'}, sch.cron),
        h('td', {}, sch.timezone || 'UTC'),
        h('td', {}, h('a', {href: '#/queues/' + encodeURIComponent(sch.queue)}, sch.queue)),
        h('td', {class: 'rules'}, rules(sch)),
        h('td', {}, sch.paused ? h('span', {class: 'hint'}, 'none while paused')
          : times[i] instanceof Error ? h('span', {class: 'error'}, times[i].message) : timesList(times[i], zoneOf(sch))),
        h('td', {}, lastEl(sch)),
        h('td', {class: 'actions'},
          h('button', {type: 'button', 'data-key': 'run:' + sch.name, 'aria-label': `Run schedule ${sch.name} now`, onclick: () => runNow(sch)}, 'Run now'),
          h('button', {type: 'button', 'data-key': 'runs:' + sch.name, 'aria-label': `Show the runs of schedule ${sch.name}`,
            onclick: () => ctx.act(() => showRuns(sch, zoneOf(sch)))}, 'Runs'),
          h('button', {type: 'button', 'data-key': (sch.paused ? 'resume:' : 'pause:') + sch.name,
            'aria-label': `${sch.paused ? 'Resume' : 'Pause'} schedule ${sch.name}`, onclick: () => pauseOrResume(sch)}, sch.paused ? 'Resume' : 'Pause'),
          h('button', {type: 'button', 'data-key': 'edit:' + sch.name, 'aria-label': `Edit schedule ${sch.name}`, onclick: () => edit(sch)}, 'Edit'),
          h('button', {type: 'button', class: 'danger', 'data-key': 'delete:' + sch.name, 'aria-label': `Delete schedule ${sch.name}`,
            onclick: () => remove(sch)}, 'Delete')))));
      stack(table);
    },
  };
}
