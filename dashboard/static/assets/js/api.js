// The HTTP API under /v1, with the token kept in session storage. Every
// failure is an ApiError carrying the server's message ("hourglass: ..."),
// and a 401 an AuthError, which makes the page ask for the token.

const tokenKey = 'hourglass-token';

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.name = 'ApiError';
    this.status = status; // 0: the server could not be reached
  }
}

export class AuthError extends ApiError {
  constructor(message) {
    super(401, message);
    this.name = 'AuthError';
  }
}

export function token() {
  return sessionStorage.getItem(tokenKey) || '';
}

export function setToken(t) {
  if (t) sessionStorage.setItem(tokenKey, t);
  else sessionStorage.removeItem(tokenKey);
}

// seg escapes a queue name, task id or schedule name as one path segment.
export const seg = encodeURIComponent;

// parse reads JSON text as JSON.parse does, except that a number the
// browser cannot hold exactly (an id over 2^53, 1.10) stays as written
// when it is shown again with JSON.stringify, where the browser has
// JSON.rawJSON: payloads are shown as they were put.
export function parse(text) {
  if (!JSON.rawJSON) return JSON.parse(text);
  return JSON.parse(text, (key, value, context) =>
    typeof value === 'number' && context && context.source !== String(value) ? JSON.rawJSON(context.source) : value);
}

// call makes one API call and answers the decoded JSON (null for 204).
// A string body is sent as it is (JSON text built by the caller), any
// other body as JSON. With raw set it answers the body's text instead.
export async function call(method, path, body, {raw = false} = {}) {
  const headers = {Accept: 'application/json'};
  const t = token();
  if (t) headers.Authorization = 'Bearer ' + t;
  const init = {method, headers, cache: 'no-store'};
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    init.body = typeof body === 'string' ? body : JSON.stringify(body);
  }
  let res;
  try {
    res = await fetch(path, init);
  } catch (e) {
    throw new ApiError(0, 'cannot reach the server (' + e.message + ')');
  }
  const text = await res.text();
  let data = null;
  if (text && !(raw && res.ok)) {
    try {
      data = parse(text);
    } catch {
      throw new ApiError(res.status, `the server answered ${res.status} with a body that is not JSON`);
    }
  }
  if (res.status === 401) throw new AuthError((data && data.error) || 'hourglass: a token is needed');
  if (!res.ok) throw new ApiError(res.status, (data && data.error) || `hourglass: status ${res.status}`);
  return raw ? text : data;
}

// memo holds the answers of atMostEvery by key: {at, value}.
const memo = new Map();

// atMostEvery answers the last answer of fn for key while it is younger
// than ms, and calls fn again after. The due-time histogram goes through
// it: the server counts every delayed task under the broker's lock for
// it (about 10 ms a million), so a page left open polls it every 30 s,
// not at every refresh. A change of page or an action forgets them all
// (forgetAnswers).
export async function atMostEvery(key, ms, fn) {
  const hit = memo.get(key);
  if (hit && Date.now() - hit.at < ms) return hit.value;
  const value = await fn();
  memo.set(key, {at: Date.now(), value});
  return value;
}

// forgetAnswers drops every answer atMostEvery holds.
export function forgetAnswers() {
  memo.clear();
}
