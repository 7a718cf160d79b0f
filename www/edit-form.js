// The edit-form story with leases (docs/LEASES.md): take the lease when the form is shown (tryLock), keep it
// alive while the page is open (keepAlive), check it when saving (checkLock) and release it after the save
// (releaseLock). A page that cannot get the lease says who is editing and gets it once it is free. The
// leases come from their own module, `weblocks/leases` (here from the repository: ../js/leases_entry.js).
//
// Two settings, one story:
// - in this browser (the default): the lease in IndexedDB (weblocks' default store), the article in
//   localStorage. Open the page in two tabs; a waiting tab tries again every `retry` ms.
// - between users (`?user=alice`): the lease in the lease service (createLeases(serverLeaseStore(...))),
//   the article in the demo's DEV-ONLY backend (scripts/dev_lease_backend.mjs), which also mints the
//   user's token and checks the lease before it saves. Open it as alice and as bob in two browser
//   profiles. The page watches the article's lease: a waiting user is told as soon as it is released or
//   expires, and an editor whose lease is taken over turns read-only at once. bob may take over.
//
// An editor who loses the lease (taken over, expired, a save refused) never loses the text: the form turns
// read-only and offers what was not saved, to copy or to keep as a draft in this browser (restored on a
// later edit, by hand); it is never written over the article someone else saved.
import { leases as browserLeases, createLeases, serverLeaseStore } from '../js/leases_entry.js';

const params = new URLSearchParams(location.search);
const articleId = params.get('article') ?? '10';
const ttlMs = Number(params.get('ttl') ?? 30_000);
const everyMs = Number(params.get('every') ?? ttlMs / 3); // 0: no keep-alive
const retryMs = Number(params.get('retry') ?? 1000);
const userName = params.get('user');
const LEASE_TYPE = 'domain.Article';

const $ = (id) => document.getElementById(id);
let lockId = null;
let fence = null;
let stopKeepAlive = () => {};
let retryTimer = 0;
let loaded = null; // the article as it was when this edit began: what "unsaved" is measured against

const time = (ms) => new Date(ms).toLocaleTimeString();
// "10:02": 24-hour, whatever the locale's habit.
const hourMinute = (ms) => new Date(ms).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', hourCycle: 'h23' });
const defaultArticle = () => ({ title: `Article ${articleId}`, body: 'Edit me.', savedAt: null });

/** The states in which this page held the lease and no longer does: the edit cannot be saved. */
const LOST_STATES = ['save-failed', 'lost', 'taken-over'];

function show(state, message) {
  const wasEditing = $('status').dataset.state === 'editing';
  $('status').dataset.state = state;
  $('status').textContent = message;
  // Only an editor with a live lease may type; once it is lost the form is read-only and its unsaved
  // text is offered next to it.
  $('fields').disabled = state !== 'editing';
  $('take-over').hidden = !(state === 'locked' && site.mayTakeOver);
  if (wasEditing && LOST_STATES.includes(state)) offerUnsaved();
  if (state === 'editing') $('draft').hidden = true;
}

const draftKey = () => `weblocks-demo:draft:${userName ?? 'this-browser'}:${articleId}`;

/** Show the text the form holds that was not saved (if it changed since the edit began). */
function offerUnsaved() {
  const title = $('title').value;
  const body = $('body').value;
  if (loaded !== null && title === loaded.title && body === loaded.body) return;
  $('draft-title').value = title;
  $('draft-body').value = body;
  $('draft-note').textContent = '';
  $('draft').hidden = false;
}

async function copyDraft() {
  const text = `${$('draft-title').value}\n\n${$('draft-body').value}`;
  try {
    await navigator.clipboard.writeText(text);
  } catch {
    // No async clipboard (a plain-http page, or no permission): select the text for the user to copy.
    $('draft-body').select();
    if (!document.execCommand('copy')) {
      $('draft-note').textContent = 'Select the text above and copy it (this page may not write the clipboard).';
      return;
    }
  }
  $('draft-note').textContent = 'Copied.';
}

function keepDraft() {
  localStorage.setItem(draftKey(), JSON.stringify({ title: $('draft-title').value, body: $('draft-body').value, keptAt: Date.now() }));
  $('draft-note').textContent = `Kept as a draft in this browser at ${time(Date.now())}: you can restore it the next time you edit article ${articleId}.`;
}

/** While editing: offer the kept draft, if any, to be put back in the form (by hand, never saved by itself). */
function offerDraft() {
  const draft = JSON.parse(localStorage.getItem(draftKey()) ?? 'null');
  $('restore').hidden = draft === null;
  if (draft !== null) $('restore-draft').textContent = `Restore your draft kept at ${time(draft.keptAt)}`;
}

function restoreDraft() {
  const draft = JSON.parse(localStorage.getItem(draftKey()) ?? 'null');
  if (draft === null || $('status').dataset.state !== 'editing') return;
  $('title').value = draft.title;
  $('body').value = draft.body;
  localStorage.removeItem(draftKey());
  $('restore').hidden = true;
}

/** In this browser: the lease in IndexedDB, the article in localStorage. */
function inThisBrowser() {
  const articleKey = `weblocks-demo:article:${articleId}`;
  addEventListener('storage', (e) => e.key === articleKey && showSaved());
  return {
    leases: browserLeases,
    lockIdKey: `weblocks-demo:lockId:${articleId}`,
    mayTakeOver: false,
    loadArticle: async () => JSON.parse(localStorage.getItem(articleKey) ?? 'null') ?? defaultArticle(),
    async saveArticle(article) {
      await browserLeases.checkLock(lockId); // check the lease before changing anything
      localStorage.setItem(articleKey, JSON.stringify({ ...article, savedAt: Date.now() }));
    },
    lockedMessage: (e) =>
      `Article ${articleId} is being edited elsewhere (lease until ${time(e.expiresAt)}). ` +
      'You can edit it once it is saved there, or once that lease expires.',
    waitForLease: () => {
      retryTimer = setTimeout(takeLease, retryMs);
    },
  };
}

/** Between users: the lease service, and the dev backend for the token and the article. */
async function betweenUsers(name) {
  const minted = await (await fetch(`/dev/token?user=${encodeURIComponent(name)}`)).json();
  if (!minted.token) throw new Error(minted.error?.message ?? 'no token');
  const leases = createLeases(serverLeaseStore({ url: params.get('service') ?? minted.service, token: minted.token }));
  const article = `/dev/articles/${encodeURIComponent(articleId)}`;
  let latest = null; // the last change the stream reported
  document.title = `${minted.user.name}: ${document.title}`;
  $('user').textContent = `Signed in as ${minted.user.name} (a dev-only token). `;
  leases.watch(LEASE_TYPE, articleId, (change) => {
    latest = change;
    const state = $('status').dataset.state;
    if (state === 'locked' && change.lease === null) {
      show('locked', `The lease of article ${articleId} ${change.kind === 'expired' ? 'expired' : 'was released'}: taking it…`);
      takeLease();
    } else if (state === 'locked') {
      show('locked', site.lockedMessage({ holder: change.lease.holder, acquiredAt: change.lease.acquiredAt }));
    } else if (lockId !== null && change.lease !== null && change.fence > fence && ['editing', 'lost'].includes(state)) {
      stopKeepAlive();
      show(
        'taken-over',
        `${change.lease.holder.name} took over article ${articleId} at ${hourMinute(change.lease.acquiredAt)}. ` +
          'This form is read-only now; your changes were not saved (they are below, to copy or keep as a draft).',
      );
    }
    if (change.kind !== 'extended') showSaved();
  });
  return {
    leases,
    lockIdKey: `weblocks-demo:lockId:${name}:${articleId}`,
    mayTakeOver: minted.user.perms.some((p) => p === 'takeover' || p === 'admin'),
    loadArticle: async () => (await fetch(article)).json(),
    async saveArticle({ title, body }) {
      // The backend checks the lease with the service (and its fencing number) before it writes.
      const response = await fetch(article, {
        method: 'PUT',
        headers: { authorization: `Bearer ${minted.token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ title, body, lockId }),
      });
      const answer = await response.json();
      if (!response.ok) throw Object.assign(new Error(answer.error.message), answer.error);
    },
    lockedMessage: (e) =>
      `Article ${articleId} is being edited by ${e.holder.name} since ${hourMinute(e.acquiredAt)}. ` +
      (minted.user.perms.length > 0 ? 'You may take it over.' : 'You can edit it once it is saved there, or once that lease expires.'),
    // The stream says when the lease is free; if it already said so, the conflict raced with that: retry.
    waitForLease: () => {
      if (latest?.lease === null) retryTimer = setTimeout(takeLease, retryMs);
    },
  };
}

const site = userName ? await betweenUsers(userName) : inThisBrowser();
const { leases } = site;

async function showSaved() {
  const { title, savedAt, savedBy } = await site.loadArticle();
  $('saved').textContent = savedAt ? `“${title}”, saved at ${time(savedAt)}${savedBy ? ` by ${savedBy}` : ''}` : 'never saved';
}

async function startEditing(id, info) {
  lockId = id;
  fence = info.fence ?? null;
  sessionStorage.setItem(site.lockIdKey, id);
  const { title, body } = await site.loadArticle();
  loaded = { title, body };
  $('title').value = title;
  $('body').value = body;
  offerDraft();
  show('editing', `You are editing article ${articleId}. Your lease runs until ${time(info.expiresAt)}` +
    (everyMs > 0 ? ` and is extended every ${everyMs / 1000} s while this page is open.` : ' (no keep-alive).'));
  if (everyMs > 0) {
    stopKeepAlive = leases.keepAlive(id, {
      everyMs,
      onLost: (e) =>
        $('status').dataset.state === 'editing' &&
        show('lost', `Your lease was lost (${e.code}${e.deadline ? ', by this page’s deadline: the lease service could not be reached in time' : ''}): ${e.message}. Your changes cannot be saved.`),
    });
  }
}

async function takeLease() {
  clearTimeout(retryTimer);
  const resumed = sessionStorage.getItem(site.lockIdKey);
  if (resumed) {
    // This tab held the lease before a reload: resume it if it is still ours and live.
    // It resumes with its full ttl left: the reload's time is given back, so reloads never wear it down.
    const info = await leases.checkLock(resumed).catch(() => null);
    const topped = info && (await leases.extendLockExpiration(resumed, Math.max(1, ttlMs - (info.expiresAt - (info.now ?? Date.now())))).catch(() => null));
    if (topped) return startEditing(resumed, topped);
    sessionStorage.removeItem(site.lockIdKey);
  }
  try {
    const id = await leases.tryLock(LEASE_TYPE, articleId, { ttlMs });
    await startEditing(id, await leases.checkLock(id));
  } catch (e) {
    if (e.code !== 'AlreadyLocked') return show('error', `Could not take the lease (${e.code}): ${e.message}`);
    show('locked', site.lockedMessage(e));
    site.waitForLease();
  }
}

async function takeOver() {
  try {
    const id = await leases.takeOver(LEASE_TYPE, articleId, { ttlMs });
    await startEditing(id, await leases.checkLock(id));
  } catch (e) {
    show('error', `Could not take over (${e.code}): ${e.message}`);
  }
}

async function save(event) {
  event.preventDefault();
  try {
    await site.saveArticle({ title: $('title').value, body: $('body').value });
  } catch (e) {
    stopKeepAlive();
    const why = {
      Expired: `your edit lease expired at ${time(e.expiresAt)}`,
      TakenOver: 'your edit lease expired and someone else is editing this article now',
      Revoked: `${e.holder?.name ?? 'someone'} took over this article at ${hourMinute(e.acquiredAt)}`,
      NotFound: 'your edit lease no longer exists',
    }[e.code] ?? `the lease check failed (${e.code}: ${e.message})`;
    show('save-failed', `Not saved: ${why}. Nothing was overwritten; your text is below, to copy or keep as a draft.`);
    return;
  }
  stopKeepAlive();
  await leases.releaseLock(lockId).catch(() => {});
  sessionStorage.removeItem(site.lockIdKey);
  show('saved', `Saved, and the lease is released: ${userName ? 'another user' : 'another tab'} can edit the article now.`);
  showSaved();
}

async function cancel() {
  stopKeepAlive();
  await leases.releaseLock(lockId).catch(() => {});
  sessionStorage.removeItem(site.lockIdKey);
  show('cancelled', 'Cancelled without saving; the lease is released.');
}

function pause() {
  stopKeepAlive();
  $('pause').disabled = true;
  $('status').textContent += ' Keep-alive paused: the lease will expire.';
}

async function refreshLeases() {
  const listed = await (userName ? leases.list(LEASE_TYPE) : leases.list()).catch(() => []);
  const rows = listed.map(({ type, id, expiresAt, holder }) => {
    const tr = document.createElement('tr');
    for (const text of [type, id, holder?.name ?? 'this browser', `${Math.max(0, (expiresAt - Date.now()) / 1000).toFixed(1)} s`]) {
      tr.append(Object.assign(document.createElement('td'), { textContent: text }));
    }
    return tr;
  });
  if (!rows.length) rows.push(Object.assign(document.createElement('tr'), { innerHTML: '<td class="empty" colspan="4">none</td>' }));
  $('leases').tBodies[0].replaceChildren(...rows);
}

$('article-id').textContent = articleId;
$('form').addEventListener('submit', save);
$('cancel').addEventListener('click', cancel);
$('pause').addEventListener('click', pause);
$('take-over').addEventListener('click', takeOver);
$('copy-draft').addEventListener('click', copyDraft);
$('keep-draft').addEventListener('click', keepDraft);
$('restore-draft').addEventListener('click', restoreDraft);
showSaved();
refreshLeases();
setInterval(refreshLeases, 1000);
takeLease();
