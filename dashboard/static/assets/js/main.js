// The dashboard's shell: hash routing between the three pages, polling
// the current page every few seconds, the token, and the notices.
//
// A page module exports enter(main, params, ctx), which builds the page
// into main once and returns {title, refresh(), leave?()}; refresh reads
// the API and redraws only the parts that hold data, keeping the focus
// where it was (dom.js swap), and throws the API's errors.

import {call, token, setToken, forgetAnswers, AuthError} from './api.js';
import {h, clock, now, localZone} from './dom.js';
import * as overview from './overview.js';
import * as queue from './queue.js';
import * as schedules from './schedules.js';

const every = 3000; // ms between polls

const main = document.getElementById('main');
const updated = document.getElementById('updated');
const problemEl = document.getElementById('problem');
const noticeEl = document.getElementById('notice');
const pauseBtn = document.getElementById('pause');
const forgetBtn = document.getElementById('forget');

let page = null; // the current page, or null while asking for the token
let generation = 0; // counts page changes, to drop answers for a page left
let timer = 0;
let running = null; // the refresh under way
let again = false; // another refresh was asked for while one ran
let paused = false;

// problem shows an error in the footer's alert region ('' clears it).
function problem(msg) {
  if (problemEl.textContent !== msg) problemEl.textContent = msg;
}

let noticeTimer = 0;
// notice tells the result of an action in the status region.
function notice(msg) {
  noticeEl.textContent = msg;
  clearTimeout(noticeTimer);
  if (msg) noticeTimer = setTimeout(() => { noticeEl.textContent = ''; }, 15000);
}

// act runs an action (a click, a form), asking for the token on 401 and
// showing any other error; it answers fn's result, or undefined.
async function act(fn) {
  forgetAnswers();
  try {
    return await fn();
  } catch (e) {
    if (e instanceof AuthError) login(e.message);
    else problem(e.message);
  }
}

const ctx = {notice, problem, act, refresh: () => refresh(), login: (m) => login(m)};

// parseRoute maps a location hash to a page and its parameters.
function parseRoute(hash) {
  const path = hash.replace(/^#/, '') || '/';
  if (path === '/') return {view: overview, params: {}, nav: 'overview'};
  if (path === '/schedules') return {view: schedules, params: {}, nav: 'schedules'};
  const m = /^\/queues\/([^/]+)(?:\/(all|delayed|ready|reserved|dead))?$/.exec(path);
  if (m) {
    try {
      return {view: queue, params: {queue: decodeURIComponent(m[1]), state: m[2] || 'all'}, nav: 'overview'};
    } catch {
      return null;
    }
  }
  return null;
}

function route() {
  generation++;
  page?.leave?.();
  page = null;
  again = false;
  const r = parseRoute(location.hash);
  for (const a of document.querySelectorAll('[data-nav]')) {
    if (r && a.dataset.nav === r.nav) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  main.replaceChildren();
  notice('');
  forgetAnswers();
  if (!r) {
    document.title = 'Not found · hourglass';
    main.append(h('h1', {tabindex: -1}, 'No such page'), h('p', {}, h('a', {href: '#/'}, 'Go to the overview')));
    return;
  }
  page = r.view.enter(main, r.params, ctx);
  document.title = page.title + ' · hourglass';
  forgetBtn.hidden = !token();
  refresh();
}

// refresh reads the current page's data now, then every few seconds; a
// call while one is under way asks for one more after it.
async function refresh() {
  clearTimeout(timer);
  if (!page || paused) return;
  if (running) {
    again = true;
    return running;
  }
  const g = generation;
  running = (async () => {
    try {
      await page.refresh();
      if (g !== generation) return;
      updated.textContent = `Updated ${clock(now())}; updates every ${every / 1000} s. Times are in your browser's zone, ${localZone()}, unless a schedule's zone is named.`;
      problem('');
    } catch (e) {
      if (g !== generation) return;
      if (e instanceof AuthError) {
        login(e.message);
        return;
      }
      problem(e.message);
    }
  })();
  await running;
  running = null;
  if (g !== generation) return;
  if (again) {
    again = false;
    return refresh();
  }
  if (page && !paused && !document.hidden) timer = setTimeout(refresh, every);
}

// login asks for the token, in place of the page, and comes back to the
// page once the server takes it.
function login(message) {
  const had = token();
  setToken('');
  generation++;
  page?.leave?.();
  page = null;
  clearTimeout(timer);
  forgetBtn.hidden = true;
  problem('');
  document.title = 'Token · hourglass';
  const input = h('input', {id: 'token', name: 'token', type: 'password', autocomplete: 'current-password', required: true,
    'aria-describedby': 'token-help token-error', spellcheck: 'false'});
  const error = h('p', {id: 'token-error', class: 'error', role: 'alert'},
    had && message ? 'The server refused the token (' + message + '). Enter it again.' : '');
  const form = h('form', {class: 'login', onsubmit: async (ev) => {
    ev.preventDefault();
    const t = input.value.trim();
    if (!t) {
      error.textContent = 'Enter the token.';
      input.focus();
      return;
    }
    setToken(t);
    try {
      await call('GET', '/v1/stats/queues');
    } catch (e) {
      if (e instanceof AuthError) {
        setToken('');
        error.textContent = 'The server refused this token (' + e.message + ').';
        input.setAttribute('aria-invalid', 'true');
        input.select();
        return;
      }
      error.textContent = e.message;
      return;
    }
    route();
    main.querySelector('h1')?.focus();
  }},
  h('label', {for: 'token'}, 'Token'),
  input,
  h('p', {id: 'token-help', class: 'hint'}, 'The server\'s --token (or HOURGLASS_TOKEN). This tab keeps it in its session storage until it closes, and sends it as a bearer token.'),
  error,
  h('button', {type: 'submit'}, 'Use this token'));
  main.replaceChildren(h('h1', {tabindex: -1}, 'This server needs a token'), form);
  input.focus();
}

pauseBtn.addEventListener('click', () => {
  paused = !paused;
  pauseBtn.setAttribute('aria-pressed', String(paused));
  pauseBtn.textContent = paused ? 'Resume updates' : 'Pause updates';
  if (paused) {
    clearTimeout(timer);
    updated.textContent = 'Updates paused.';
  } else {
    refresh();
  }
});

forgetBtn.addEventListener('click', () => {
  setToken('');
  login('');
});

document.addEventListener('visibilitychange', () => {
  if (!document.hidden) refresh();
});

// The charts are drawn to the width of their box: draw them again when
// the window's width changes.
let resizing = 0;
let lastWidth = window.innerWidth;
window.addEventListener('resize', () => {
  if (window.innerWidth === lastWidth) return;
  lastWidth = window.innerWidth;
  clearTimeout(resizing);
  resizing = setTimeout(refresh, 200);
});

// The skip link focuses main without touching the hash, which routes.
document.querySelector('.skip').addEventListener('click', (ev) => {
  ev.preventDefault();
  main.focus();
});

// A change of page moves the focus to its heading, so that a screen
// reader announces where the reader arrived.
window.addEventListener('hashchange', () => {
  route();
  main.querySelector('h1')?.focus();
});

route();
