// The leases demo (www/edit-form.html), the edit-form story end to end in Chromium tabs, with short ttls:
// the second tab is told the article is being edited elsewhere; the first keeps its lease alive past its
// ttl and through a reload; once the first is closed without saving, the second can edit after the lease
// expires; a save after expiry fails with a clear message and overwrites nothing.
// Needs the build (`npm run build`).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer } from '../server.mjs';
import { launchChromium, shareServerAndChromium } from '../browser.mjs';
import { openForm as openFormAt, waitForState } from '../edit_form.mjs';

const shared = shareServerAndChromium();

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

const openForm = (context, query) => openFormAt(shared.server.url, context, query);

const state = (page) => page.getAttribute('#status', 'data-state');
const storedArticle = (page, id) => page.evaluate((id) => JSON.parse(localStorage.getItem(`weblocks-demo:article:${id}`)), id);

test('two tabs: the second waits while the first edits, and edits once the closed first one\'s lease expires', async () => {
  const context = await shared.browser.newContext();
  try {
    const query = 'article=10&ttl=1500&every=300&retry=200';
    const first = await openForm(context, query);
    assert.match(await waitForState(first, 'editing'), /You are editing article 10/);
    assert.equal(await first.isEnabled('#save'), true);

    const second = await openForm(context, query);
    assert.match(await waitForState(second, 'locked'), /being edited elsewhere/);
    assert.equal(await second.isEnabled('#save'), false, 'the second form cannot be used');
    assert.match(await second.textContent('#leases'), /domain\.Article\s*10/, 'the list shows the lease');

    // The first keeps its lease alive well past its ttl, even through a reload (it resumes its own lease).
    await sleep(2500);
    assert.equal(await state(first), 'editing');
    assert.equal(await state(second), 'locked');
    await first.reload();
    await waitForState(first, 'editing');
    await sleep(1000);
    assert.equal(await state(second), 'locked');

    // Close the first without saving: its keep-alive stops; the lease expires within a ttl.
    await first.fill('#title', 'unsaved change');
    const closedAt = Date.now();
    await first.close({ runBeforeUnload: true });
    await waitForState(second, 'editing', 5000);
    const waited = Date.now() - closedAt;
    console.log(`# demo: the second tab could edit ${waited} ms after the first was closed (ttl 1500 ms)`);
    assert.ok(waited >= 1000, `not before the lease expired (${waited} ms)`);

    await second.fill('#title', 'Edited in the second tab');
    await second.click('#save');
    assert.match(await waitForState(second, 'saved'), /Saved, and the lease is released/);
    assert.equal((await storedArticle(second, '10')).title, 'Edited in the second tab');
    const left = await second.evaluate(async () => (await import('/js/leases_entry.js')).leases.list());
    assert.deepEqual(left, [], 'the save released the lease');
    assert.deepEqual(second.errors, []);
  } finally {
    await context.close();
  }
});

test('a save after the lease expired fails with a clear message, overwrites nothing, and keeps the text as a draft', async () => {
  const context = await shared.browser.newContext();
  try {
    // A ttl well above the page's deadline margin (250 ms + 0.1 %) and a loaded machine's transactions.
    const query = 'article=11&ttl=1500&every=300&retry=200';
    const stale = await openForm(context, query);
    await waitForState(stale, 'editing');
    await stale.click('#pause'); // as if the tab froze: no more extensions
    await stale.fill('#title', 'stale edit');
    await sleep(1800);
    await stale.click('#save');
    const expired = await waitForState(stale, 'save-failed');
    assert.match(expired, /^Not saved: your edit lease expired at .+\. Nothing was overwritten; your text is below/);
    assert.equal(await storedArticle(stale, '11'), null, 'nothing was written');

    // The lost edit: the form is read-only, and its unsaved text is offered, to copy or keep as a draft.
    assert.equal(await stale.isEditable('#title'), false, 'read-only');
    assert.equal(await stale.isVisible('#draft'), true);
    assert.equal(await stale.inputValue('#draft-title'), 'stale edit');
    await stale.click('#keep-draft');
    assert.match(await stale.textContent('#draft-note'), /Kept as a draft in this browser/);

    // Someone else takes the article; the kept draft is offered to them (by hand), and their save stands.
    const other = await openForm(context, query);
    await waitForState(other, 'editing');
    assert.match(await other.textContent('#restore-draft'), /^Restore your draft kept at /);
    await other.fill('#body', 'the new holder\'s text');
    await other.click('#save');
    await waitForState(other, 'saved');
    assert.deepEqual(
      [(await storedArticle(other, '11')).title, (await storedArticle(other, '11')).body],
      ['Article 11', 'the new holder\'s text'],
      'the draft was not written by itself',
    );
    assert.deepEqual([...stale.errors, ...other.errors], []);
  } finally {
    await context.close();
  }
});
