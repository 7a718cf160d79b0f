// Driving the demo's edit form (www/edit-form.html) in a browser context, for its e2e tests.

/** Open the form with `query` in a new page of `context`; `beforeLoad(page)` runs before it loads. */
export async function openForm(baseUrl, context, query, beforeLoad = () => {}) {
  const page = await context.newPage();
  beforeLoad(page);
  page.errors = [];
  page.on('pageerror', (e) => page.errors.push(`pageerror: ${e.message}`));
  await page.goto(`${baseUrl}www/edit-form.html?${query}`);
  return page;
}

/** Wait until the status says `state` (within `timeout` ms); returns its message. */
export async function waitForState(page, state, timeout = 5000) {
  await page.waitForSelector(`#status[data-state="${state}"]`, { timeout });
  return page.textContent('#status');
}
