// Two stories from the Web Locks spec's motivation, running in every tab of the demo:
// "primary tab" (one tab is elected; close it and another takes over) and "one writer to IndexedDB"
// (a read-modify-write that loses updates between tabs unless it runs inside an exclusive lock).
import { locks } from '../js/index.js';

const $ = (sel) => document.querySelector(sel);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// --- Primary tab: every tab asks for the same lock and never releases it; the holder is the primary.
const PRIMARY_LOCK = 'weblocks-demo:primary';
const role = $('#primary-role');
function showRole(name, text, detail) {
  role.dataset.role = name;
  role.textContent = text;
  $('#primary-detail').textContent = detail;
}
showRole('standby', 'standby (waiting)', `waiting for “${PRIMARY_LOCK}”; close the primary tab and one waiting tab takes over.`);
locks.request(PRIMARY_LOCK, () => {
  showRole('primary', 'PRIMARY', `this tab holds “${PRIMARY_LOCK}” since ${new Date().toISOString().slice(11, 23)} and never releases it.`);
  return new Promise(() => {});
});

// --- One writer to IndexedDB: read the counter, wait a little, write counter + 1.
const WRITER_LOCK = 'weblocks-demo:idb-writer';
const WRITE_DELAY_MS = 15;
const BURST = 50;
let dbPromise = null;
let myWrites = 0;

function openDb() {
  dbPromise ??= new Promise((resolve, reject) => {
    const open = indexedDB.open('weblocks-demo', 1);
    open.onupgradeneeded = () => open.result.createObjectStore('counter');
    open.onsuccess = () => resolve(open.result);
    open.onerror = () => reject(open.error);
  });
  return dbPromise;
}

/** Run one IndexedDB request in its own transaction (so a read and a later write are separate steps). */
async function inStore(mode, makeRequest) {
  const db = await openDb();
  return new Promise((resolve, reject) => {
    const request = makeRequest(db.transaction('counter', mode).objectStore('counter'));
    request.onsuccess = () => resolve(request.result);
    request.onerror = () => reject(request.error);
  });
}
const readCounter = async () => (await inStore('readonly', (store) => store.get('value'))) ?? 0;
const writeCounter = (value) => inStore('readwrite', (store) => store.put(value, 'value'));

function showCounter(value) {
  $('#idb-counter').textContent = String(value);
  $('#idb-writes').textContent = String(myWrites);
}

/** The racy read-modify-write; safe only because it runs under the exclusive lock (unless unchecked). */
async function appendLine() {
  const step = async () => {
    const value = await readCounter();
    await sleep(WRITE_DELAY_MS);
    await writeCounter(value + 1);
    myWrites += 1;
    showCounter(value + 1);
  };
  if ($('#idb-unlocked').checked) return step();
  return locks.request(WRITER_LOCK, { mode: 'exclusive' }, step);
}

async function run(count) {
  const buttons = [$('#idb-append'), $('#idb-burst')];
  buttons.forEach((b) => { b.disabled = true; });
  $('#idb-status').textContent = `writing ${count}…`;
  try {
    await Promise.all(Array.from({ length: count }, () => appendLine()));
    $('#idb-status').textContent = `done (${count})`;
  } catch (error) {
    $('#idb-status').textContent = `${error.name}: ${error.message}`;
  } finally {
    buttons.forEach((b) => { b.disabled = false; });
  }
}

$('#idb-append').addEventListener('click', () => run(1));
$('#idb-burst').addEventListener('click', () => run(BURST));
async function refreshCounter() { showCounter(await readCounter()); }
await refreshCounter();
setInterval(() => { if (document.visibilityState === 'visible') refreshCounter(); }, 300);
document.body.dataset.storiesReady = 'true';
