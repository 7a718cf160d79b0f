// The demo page: request, hold, release and abort locks by hand, and watch query() live.
import { locks, clientId, ready } from '../js/index.js';

const $ = (sel) => document.querySelector(sel);
const nativeLocks = globalThis.isSecureContext && 'locks' in navigator && navigator.locks !== locks;
$('#native').textContent = nativeLocks ? 'present (the demo uses weblocks, not it)' : 'absent';

const myClientId = clientId;
let nextRow = 1;
const rows = new Map(); // row id -> { li, release }

function log(text) {
  const li = document.createElement('li');
  li.textContent = `${new Date().toISOString().slice(11, 23)} ${text}`;
  $('#log').prepend(li);
}

function renderRow(row, state, detail = '') {
  row.badge.className = `badge ${state}`;
  row.badge.textContent = state;
  row.detail.textContent = detail;
  row.button.hidden = state !== 'held';
}

function addRow(label) {
  const list = $('#mine');
  list.querySelector('.empty')?.remove();
  const li = document.createElement('li');
  const id = nextRow++;
  li.dataset.row = String(id);
  const badge = document.createElement('span');
  const title = document.createElement('span');
  title.textContent = `#${id} ${label}`;
  const detail = document.createElement('span');
  detail.className = 'detail';
  const button = document.createElement('button');
  button.className = 'secondary';
  button.textContent = 'Release';
  li.append(badge, title, detail, button);
  list.prepend(li);
  const row = { id, li, badge, detail, button, release: null };
  rows.set(id, row);
  button.addEventListener('click', () => row.release?.('released by hand'));
  return row;
}

$('#request-form').addEventListener('submit', (event) => {
  event.preventDefault();
  const form = new FormData(event.target);
  const name = String(form.get('name'));
  const options = { mode: String(form.get('mode')) };
  if (form.get('ifAvailable')) options.ifAvailable = true;
  if (form.get('steal')) options.steal = true;
  const abortMs = String(form.get('abortMs') ?? '');
  if (abortMs !== '') options.signal = AbortSignal.timeout
    ? AbortSignal.timeout(Number(abortMs))
    : (() => { const c = new AbortController(); setTimeout(() => c.abort(), Number(abortMs)); return c.signal; })();
  const label = `${name} · ${options.mode}${options.ifAvailable ? ' · ifAvailable' : ''}${options.steal ? ' · steal' : ''}${abortMs ? ` · abort ${abortMs} ms` : ''}`;
  const row = addRow(label);
  renderRow(row, 'waiting');
  log(`#${row.id} request ${label}`);
  locks.request(name, options, (lock) => {
    if (lock === null) {
      renderRow(row, 'done', 'not available');
      log(`#${row.id} not available (callback got null)`);
      return 'not available';
    }
    renderRow(row, 'held', `since ${new Date().toISOString().slice(11, 19)}`);
    log(`#${row.id} granted ${lock.name} (${lock.mode})`);
    return new Promise((resolve) => { row.release = resolve; });
  }).then(
    (value) => { if (row.badge.textContent !== 'done') renderRow(row, 'done', String(value)); log(`#${row.id} settled: ${value}`); },
    (error) => { renderRow(row, 'error', `${error.name}: ${error.message}`); log(`#${row.id} rejected: ${error.name}`); },
  ).finally(() => { row.release = null; refresh(); });
  refresh();
});

function fillTable(table, infos) {
  const body = table.tBodies[0];
  body.replaceChildren();
  if (infos.length === 0) {
    const tr = body.insertRow();
    const td = tr.insertCell();
    td.colSpan = 3; td.className = 'empty'; td.textContent = 'none';
    return;
  }
  for (const info of infos) {
    const tr = body.insertRow();
    tr.insertCell().textContent = info.name;
    tr.insertCell().textContent = info.mode;
    const client = tr.insertCell();
    client.textContent = info.clientId === myClientId ? `${info.clientId.slice(0, 8)} (this tab)` : info.clientId.slice(0, 8);
    if (info.clientId === myClientId) client.className = 'me';
  }
}

async function refresh() {
  const state = await locks.query();
  fillTable($('#held'), state.held);
  fillTable($('#pending'), state.pending);
}

$('#client-id').textContent = myClientId;
await ready;
$('#engine-state').textContent = 'ready';
document.body.dataset.ready = 'true';
await refresh();
setInterval(() => { if (document.visibilityState === 'visible') refresh(); }, 500);
