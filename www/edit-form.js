// The seed's edit-form scenario with leases: take the lease when the form is shown (tryLock), keep it alive
// while the page is open (keepAlive), check it when saving (checkLock) and release it after the save
// (releaseLock). A tab that cannot get the lease says the article is being edited elsewhere and retries.
// Articles are kept in localStorage (the demo's "database"); the lease in IndexedDB via weblocks.
import { leases } from '../js/index.js';

const params = new URLSearchParams(location.search);
const articleId = params.get('article') ?? '10';
const ttlMs = Number(params.get('ttl') ?? 30_000);
const everyMs = Number(params.get('every') ?? ttlMs / 3); // 0: no keep-alive
const retryMs = Number(params.get('retry') ?? 1000);
const LEASE_TYPE = 'domain.Article';
const articleKey = `weblocks-demo:article:${articleId}`;
const lockIdKey = `weblocks-demo:lockId:${articleId}`; // per tab: a reload resumes its own lease

const $ = (id) => document.getElementById(id);
let lockId = null;
let stopKeepAlive = () => {};
let retryTimer = 0;

const time = (ms) => new Date(ms).toLocaleTimeString();

function show(state, message) {
  $('status').dataset.state = state;
  $('status').textContent = message;
  // After a failed save or a lost lease the text stays reachable (to copy it); saving just fails again.
  $('fields').disabled = !['editing', 'save-failed', 'lost'].includes(state);
}

function loadArticle() {
  const stored = JSON.parse(localStorage.getItem(articleKey) ?? 'null');
  return stored ?? { title: `Article ${articleId}`, body: 'Edit me.', savedAt: null };
}

function showSaved() {
  const { title, savedAt } = loadArticle();
  $('saved').textContent = savedAt ? `“${title}”, saved at ${time(savedAt)}` : 'never saved';
}

function startEditing(id, expiresAt) {
  lockId = id;
  sessionStorage.setItem(lockIdKey, id);
  const { title, body } = loadArticle();
  $('title').value = title;
  $('body').value = body;
  show('editing', `You are editing article ${articleId}. Your lease runs until ${time(expiresAt)}` +
    (everyMs > 0 ? ` and is extended every ${everyMs / 1000} s while this page is open.` : ' (no keep-alive).'));
  if (everyMs > 0) {
    stopKeepAlive = leases.keepAlive(id, {
      everyMs,
      onLost: (e) => show('lost', `Your lease was lost (${e.code}): ${e.message}. Your changes cannot be saved.`),
    });
  }
}

async function takeLease() {
  clearTimeout(retryTimer);
  const resumed = sessionStorage.getItem(lockIdKey);
  if (resumed) {
    // This tab held the lease before a reload: resume it if it is still ours and live.
    const info = await leases.checkLock(resumed).catch(() => null);
    if (info) return startEditing(resumed, info.expiresAt);
    sessionStorage.removeItem(lockIdKey);
  }
  try {
    const id = await leases.tryLock(LEASE_TYPE, articleId, { ttlMs });
    startEditing(id, (await leases.checkLock(id)).expiresAt);
  } catch (e) {
    if (e.code !== 'AlreadyLocked') return show('error', `Could not take the lease (${e.code}): ${e.message}`);
    show('locked', `Article ${articleId} is being edited elsewhere (lease until ${time(e.expiresAt)}). ` +
      'You can edit it once it is saved there, or once that lease expires.');
    retryTimer = setTimeout(takeLease, retryMs);
  }
}

async function save(event) {
  event.preventDefault();
  try {
    await leases.checkLock(lockId); // the seed: check the lease before changing anything
  } catch (e) {
    stopKeepAlive();
    const why = {
      Expired: `your edit lease expired at ${time(e.expiresAt)}`,
      TakenOver: 'your edit lease expired and someone else is editing this article now',
      NotFound: 'your edit lease no longer exists',
    }[e.code] ?? `the lease check failed (${e.code}: ${e.message})`;
    show('save-failed', `Not saved: ${why}. Nothing was overwritten; copy your text and reload to try again.`);
    return;
  }
  localStorage.setItem(articleKey, JSON.stringify({ title: $('title').value, body: $('body').value, savedAt: Date.now() }));
  stopKeepAlive();
  await leases.releaseLock(lockId).catch(() => {});
  sessionStorage.removeItem(lockIdKey);
  show('saved', 'Saved, and the lease is released: another tab can edit the article now.');
  showSaved();
}

async function cancel() {
  stopKeepAlive();
  await leases.releaseLock(lockId).catch(() => {});
  sessionStorage.removeItem(lockIdKey);
  show('cancelled', 'Cancelled without saving; the lease is released.');
}

function pause() {
  stopKeepAlive();
  $('pause').disabled = true;
  $('status').textContent += ' Keep-alive paused: the lease will expire.';
}

async function refreshLeases() {
  const rows = (await leases.list().catch(() => [])).map(({ type, id, expiresAt }) => {
    const tr = document.createElement('tr');
    for (const text of [type, id, `${Math.max(0, (expiresAt - Date.now()) / 1000).toFixed(1)} s`]) {
      tr.append(Object.assign(document.createElement('td'), { textContent: text }));
    }
    return tr;
  });
  if (!rows.length) rows.push(Object.assign(document.createElement('tr'), { innerHTML: '<td class="empty" colspan="3">none</td>' }));
  $('leases').tBodies[0].replaceChildren(...rows);
  showSaved();
}

$('article-id').textContent = articleId;
$('form').addEventListener('submit', save);
$('cancel').addEventListener('click', cancel);
$('pause').addEventListener('click', pause);
addEventListener('storage', (e) => e.key === articleKey && showSaved());
refreshLeases();
setInterval(refreshLeases, 1000);
takeLease();
