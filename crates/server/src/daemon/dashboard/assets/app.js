// The dashboard's page. Everything it shows is built as text nodes: arguments and names
// come from agents and are shown, never interpreted.
'use strict';

// The characters aai_descriptor::visible hides, filled in from that one table when the page
// is served: no control, bidi or invisible character of a client's or a descriptor's text is
// shown as itself, but as the same JSON escape the CLI prints (new lines and tabs stay).
const HIDDEN = /[__AAI_HIDDEN__]/gu;

function visible(text) {
  return String(text ?? '').replace(HIDDEN, (c) => {
    if (c === '\n' || c === '\t') return c;
    if (c === '\r') return '\\r';
    let escaped = '';
    for (let i = 0; i < c.length; i += 1) escaped += `\\u${c.charCodeAt(i).toString(16).padStart(4, '0')}`;
    return escaped;
  });
}

// Attributes a person reads; every other attribute is data (dataset, values) and kept exact.
const SHOWN_ATTRIBUTES = new Set(['title', 'aria-label', 'placeholder', 'alt']);

const LIVE_ROWS = 200;
// The session's key: handed over once in the login redirect's fragment, then kept in this
// origin's sessionStorage (never in a cookie, which every port of the host would receive).
const KEY = 'aai-dashboard-key';
if (location.hash.startsWith('#k=')) {
  sessionStorage.setItem(KEY, decodeURIComponent(location.hash.slice(3)));
  history.replaceState(null, '', location.pathname);
}
let csrf = sessionStorage.getItem(KEY) || '';
const keyed = { credentials: 'same-origin', headers: { 'X-AAI-CSRF': csrf } };
let oldest = null;

const $ = (id) => document.getElementById(id);

function el(tag, props, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props || {})) {
    if (key === 'onclick' || key === 'onchange') node.addEventListener(key.slice(2), value);
    else if (key === 'class') node.className = value;
    else if (key === 'dataset') Object.assign(node.dataset, value);
    else if (value === true) node.setAttribute(key, '');
    else if (value !== false && value != null) node.setAttribute(key, SHOWN_ATTRIBUTES.has(key) ? visible(value) : value);
  }
  for (const child of children) {
    node.append(child instanceof Node ? child : document.createTextNode(visible(child)));
  }
  return node;
}

function showError(message) {
  const box = $('error');
  box.textContent = visible(message || '');
  box.hidden = !message;
}

async function post(path, body) {
  const response = await fetch(path, {
    method: 'POST',
    credentials: 'same-origin',
    headers: { 'Content-Type': 'application/json', 'X-AAI-CSRF': csrf },
    body: JSON.stringify(body || {}),
  });
  const answer = await response.json().catch(() => ({}));
  showError(response.ok ? '' : (answer.error || `${path}: ${response.status}`));
  return response.ok ? answer : null;
}

function time(ms) {
  return new Date(ms).toLocaleTimeString();
}

function rowCells(row) {
  return [
    el('td', { class: 'time' }, time(row.ts_ms)),
    el('td', {}, row.caller),
    el('td', {}, `${row.app}:${row.tool}`),
    el('td', { class: `result ${row.result}` }, row.result),
    el('td', {}, row.decision),
    el('td', { class: 'args', title: row.error || '' }, row.args),
  ];
}

// One line per call: the audit log writes a call's start and its end as two rows, and the
// second replaces the first where it stands.
function liveRow(row) {
  const line = el('tr', { dataset: { id: row.id, call: row.call_id, tool: row.tool } }, ...rowCells(row));
  const live = $('live');
  const earlier = row.call_id
    ? Array.from(live.rows).find((r) => r.dataset.call === row.call_id)
    : null;
  if (earlier) {
    earlier.replaceWith(line);
    return;
  }
  live.prepend(line);
  while (live.rows.length > LIVE_ROWS) live.deleteRow(-1);
}

function showHistory(rows, append) {
  const body = $('history');
  if (!append) body.replaceChildren();
  for (const row of rows) {
    body.append(el('tr', { dataset: { id: row.id } }, el('td', {}, row.id), ...rowCells(row)));
  }
  if (rows.length) oldest = rows[rows.length - 1].id;
  $('older').hidden = rows.length < 100;
}

async function search(append) {
  const params = new URLSearchParams({ q: $('query').value, limit: '100' });
  if (append && oldest != null) params.set('before', String(oldest));
  const response = await fetch(`/api/audit?${params}`, keyed);
  const answer = await response.json().catch(() => ({}));
  if (!response.ok) return showError(answer.error || 'the audit log could not be searched');
  showHistory(answer.rows, append);
}

async function verify() {
  $('verified').textContent = 'checking…';
  const response = await fetch('/api/audit/verify', keyed);
  const answer = await response.json().catch(() => ({}));
  const out = $('verified');
  out.className = answer.ok ? 'ok' : 'bad';
  out.textContent = answer.ok
    ? `intact: ${answer.rows} rows`
    : visible(`BROKEN at row ${answer.id}: ${answer.reason || answer.error}`);
}

function showConfigProblem(problem) {
  $('config-problem').hidden = !problem;
  $('config-problem').textContent = problem
    ? 'config.json is invalid, so the last good config stays in force: ' + problem
    : '';
}

function showStopped(stopped) {
  document.body.classList.toggle('stopped', stopped);
  $('status').textContent = stopped ? 'STOPPED: no call runs until you resume' : 'running';
  $('resume').hidden = !stopped;
  $('stop').disabled = stopped;
}

function size(item) {
  const chars = item.args_chars ?? 0;
  const bytes = item.args_bytes ?? chars;
  return chars === bytes ? `${chars} characters` : `${chars} characters, ${bytes} bytes`;
}

// A question is shown whole: a long one scrolls inside its card, with its size, never cut.
function showApprovals(pending) {
  $('no-approvals').hidden = pending.length > 0;
  $('approvals').replaceChildren(...pending.map((item) => el('li', { dataset: { id: item.id } },
    el('pre', { class: 'question', tabindex: '0' }, item.message),
    el('p', { class: 'meta' }, `${item.client} · ${item.app}:${item.tool} · ${item.id} · arguments: ${size(item)}`),
    el('div', { class: 'choices' }, ...item.choices.map((choice) => el('button', {
      class: choice.answer === 'deny' ? 'deny' : '',
      dataset: { answer: choice.answer },
      onclick: () => post('/api/approvals/answer', { id: item.id, answer: choice.answer }),
    }, choice.label))))));
}

function showGrants(grants) {
  $('no-grants').hidden = grants.length > 0;
  $('grants-table').hidden = grants.length === 0;
  $('grants').replaceChildren(...grants.map((grant) => el('tr', {},
    el('td', {}, grant.client),
    el('td', {}, grant.app),
    el('td', {}, grant.tool || 'every tool'),
    el('td', {}, grant.prefix || ''),
    el('td', {}, grant.scope === 'session' ? 'this session' : 'until revoked'),
    el('td', {}, grant.via),
    el('td', {}, el('button', {
      class: 'revoke',
      dataset: { client: grant.client, app: grant.app, tool: grant.tool || '' },
      onclick: () => post('/api/grants/revoke', grant),
    }, 'Revoke')))));
}

function showClients(clients, profiles, fallback) {
  $('default-profile').textContent = visible(fallback);
  $('clients-hint').hidden = false;
  $('clients').replaceChildren(...clients.map((client) => {
    const choose = el('select', {
      dataset: { client: client.name },
      'aria-label': `Profile of ${client.name}`,
      onchange: (event) => post('/api/profile', { client: client.name, profile: event.target.value }),
    }, ...profiles.map((name) => el('option', { value: name, selected: name === client.profile }, name)));
    return el('tr', {}, el('td', {}, client.name), el('td', {}, choose));
  }));
}

function showToolsets(toolsets) {
  $('toolsets').replaceChildren(...toolsets.map((set) => el('li', {},
    el('label', {},
      el('input', {
        type: 'checkbox',
        checked: set.on,
        dataset: { app: set.app },
        onchange: (event) => post('/api/toolsets', { app: set.app, on: event.target.checked }),
      }),
      ` ${set.name} (${set.app})`))));
}

function showServers(servers) {
  $('no-servers').hidden = servers.length > 0;
  $('servers-table').hidden = servers.length === 0;
  $('servers').replaceChildren(...servers.map((server) => el('tr', { dataset: { app: server.app }, class: `server-${server.state.replace(' ', '-')}` },
    el('td', {}, server.app),
    el('td', {}, server.state + (server.pid ? ` (pid ${server.pid})` : '')),
    el('td', {}, server.server),
    el('td', {}, String(server.tools)),
    el('td', {}, server.changed.length ? `changed: ${server.changed.join(', ')}` : 'as pinned'),
    el('td', {}, server.problem || ''))));
}

function showSchedules(schedules) {
  const tasks = schedules.tasks || [];
  $('no-schedules').hidden = tasks.length > 0;
  $('schedules-table').hidden = tasks.length === 0;
  $('schedules').replaceChildren(...tasks.map((task) => el('tr', { dataset: { task: task.name } },
    el('td', {}, el('input', {
      type: 'checkbox',
      checked: task.enabled,
      'aria-label': `Run ${task.name} on schedule`,
      onchange: (event) => post('/api/schedules/enable', { name: task.name, on: event.target.checked }),
    })),
    el('td', {}, task.name),
    el('td', {}, task.time_zone ? `${task.cron} (${task.time_zone})` : task.cron),
    el('td', {}, task.runs),
    el('td', {}, `${task.granted_tools.join(', ') || 'nothing'} · up to ${task.max_risk_level} risk`),
    el('td', {}, task.next_run || '—'),
    el('td', {}, task.last_run ? `${task.last_run.state} (${task.last_run.scheduled})` : '—'),
    el('td', {}, el('button', {
      class: 'run-now',
      onclick: () => post('/api/schedules/run', { name: task.name }),
    }, 'Run now')))));
  $('runs').replaceChildren(...(schedules.runs || []).map((run) => el('tr', { class: `run-${run.state}` },
    el('td', {}, String(run.run_id)),
    el('td', {}, run.task),
    el('td', {}, run.scheduled),
    el('td', {}, run.kind),
    el('td', {}, run.state),
    el('td', {}, String(run.steps)),
    el('td', {}, run.error || ''))));
  if (schedules.error) showError(schedules.error);
}

async function load() {
  const response = await fetch('/api/state', keyed);
  if (response.status === 401 || response.status === 403) {
    $('status').textContent = 'not logged in: run `aai-gateway dashboard`';
    return false;
  }
  const state = await response.json();
  showStopped(state.stopped);
  showConfigProblem(state.config_problem);
  showApprovals(state.pending);
  showGrants(state.grants);
  showClients(state.clients, state.profiles, state.default_profile);
  showToolsets(state.toolsets);
  showServers(state.mcp_servers || []);
  showSchedules(state.schedules);
  if (!$('live').rows.length) state.recent.slice().reverse().forEach(liveRow);
  document.body.classList.remove('loading');
  return true;
}

let reload = null;

function listen() {
  const events = new EventSource(`/api/events?k=${encodeURIComponent(csrf)}`);
  events.onopen = () => { document.body.dataset.live = 'yes'; };
  events.onerror = () => { document.body.dataset.live = 'no'; };
  events.onmessage = (message) => {
    const event = JSON.parse(message.data);
    switch (event.kind) {
      case 'row':
        liveRow(event.row);
        // A call may have started or ended an MCP server: its state is read again soon.
        clearTimeout(reload);
        reload = setTimeout(load, 300);
        break;
      case 'stop': showStopped(event.stopped); break;
      default: load(); // approvals, grants, settings, or a missed stretch
    }
  };
}

document.addEventListener('DOMContentLoaded', async () => {
  $('stop').addEventListener('click', () => post('/api/stop'));
  $('resume').addEventListener('click', () => post('/api/resume'));
  $('search').addEventListener('click', () => search(false));
  $('query').addEventListener('keydown', (event) => { if (event.key === 'Enter') search(false); });
  $('older').addEventListener('click', () => search(true));
  $('verify').addEventListener('click', verify);
  if (await load()) {
    listen();
    search(false);
  }
});
