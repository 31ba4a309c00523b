// End-to-end test of the console in headless Chromium, run by
// ui/e2e_test.go against a real server it has filled with data.
//
// Environment: HOURGLASS_URL (the server), HOURGLASS_TOKEN (its auth token),
// SCREENSHOT_DIR (where the screenshots go), E2E_COLLECTION, E2E_SENSOR and
// E2E_EXPECT_DELETE (the collection, the sensor to give a one-day rule, and
// how many measurements that rule expires), CHROMIUM (default
// /usr/bin/chromium). Exits non-zero on the first failed check.
//
// The sensor's measurements are all older than a day: once the rule has
// expired them, only the rollup the script creates first still holds
// them, and the chart of that sensor reads it.
import { chromium } from "playwright-core";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const base = mustEnv("HOURGLASS_URL");
const token = mustEnv("HOURGLASS_TOKEN");
const shots = mustEnv("SCREENSHOT_DIR");
const coll = mustEnv("E2E_COLLECTION");
const sensor = mustEnv("E2E_SENSOR");
const expectDelete = Number(mustEnv("E2E_EXPECT_DELETE"));
const exe = process.env.CHROMIUM || "/usr/bin/chromium";

function mustEnv(k) {
  const v = process.env[k];
  if (!v) throw new Error(`${k} is not set`);
  return v;
}

const t0 = Date.now();
function step(msg) {
  console.log(`[${((Date.now() - t0) / 1000).toFixed(1)}s] ${msg}`);
}

function check(cond, msg) {
  if (!cond) throw new Error(`check failed: ${msg}`);
}

async function api(method, path, body) {
  const r = await fetch(base + path, {
    method, headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: r.status, body: await r.json() };
}

const fmt = new Intl.NumberFormat("en-US");
const userDir = mkdtempSync(join(tmpdir(), "hourglass-e2e-chromium-"));
const context = await chromium.launchPersistentContext(userDir, {
  executablePath: exe,
  headless: true,
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  viewport: { width: 1280, height: 800 },
  locale: "en-US",
  timezoneId: "Europe/Berlin",
  acceptDownloads: true,
});
const pageErrors = [];
try {
  const page = context.pages()[0] ?? await context.newPage();
  page.setDefaultTimeout(15_000);
  page.on("pageerror", (e) => pageErrors.push(e.message));
  // The rollup list's reads of the collection, to see the page poll it
  // while open and stop when left.
  let rollupReads = 0;
  page.on("request", (r) => {
    if (r.method() === "GET" && new URL(r.url()).pathname === `/v1/collections/${coll}/rollups`) rollupReads++;
  });
  page.on("console", (m) => {
    // A 401 before the token is given and the 400s of the bad TTL value
    // and the bad rollup window are expected; anything else is not.
    if (m.type() === "error" && !/status of 40[01]/.test(m.text())) pageErrors.push(m.text());
  });
  const shot = (name) => page.screenshot({ path: join(shots, `${name}.png`), fullPage: true });

  step("open the console: it asks for the token");
  await page.goto(`${base}/ui/`);
  const tokenInput = page.locator("#token-input");
  await tokenInput.waitFor();
  await shot("token");
  await tokenInput.fill("not-the-token");
  await page.keyboard.press("Enter");
  await page.locator("#token-error", { hasText: "refused this token" }).waitFor();
  await tokenInput.fill(token);
  await page.keyboard.press("Enter");
  await tokenInput.waitFor({ state: "detached" });

  step("collections page: the table and the suspended warning");
  const row = page.locator("table.data tbody tr", { has: page.locator(`a:text-is("${coll}")`) });
  await row.waitFor();
  await page.locator(".notice.warning", { hasText: "Expiry suspended" }).first().waitFor();
  check(await page.locator(".notice.warning", { hasText: "Expiry suspended" }).first().textContent().then((t) => /outside 1970-01-01T00:00:00Z\.\.2038-01-19T03:14:07Z/.test(t)), "warning names the range");
  await page.locator(".notice.warning", { hasText: "Archiving suspended" }).first().waitFor();
  await shot("collections");
  await page.keyboard.press("Tab");
  check(await page.evaluate(() => document.activeElement?.textContent) === "Skip to content", "the first Tab reaches the skip link");

  step("create a collection: the API's message for a bad name, then a good one");
  await page.locator("details.create summary").click();
  const nameIn = page.locator("details.create input[name=name]");
  await nameIn.fill("bad name!");
  await page.getByRole("button", { name: "Create collection" }).click();
  const nameErr = (await api("PUT", "/v1/collections/bad%20name!", { timeseries: { timeField: "timestamp" } })).body.error.message;
  await page.locator("details.create .field-error", { hasText: nameErr }).waitFor();
  await nameIn.fill("greenhouse");
  await page.getByRole("button", { name: "Create collection" }).click();
  await page.locator("h1", { hasText: "greenhouse" }).waitFor();
  await page.getByTestId("stat-count").filter({ hasText: /^0$/ }).waitFor();
  await page.locator("form.add-rollup input[name=fields]").waitFor();
  check((await api("GET", "/v1/collections/greenhouse")).body.options.timeseries.metaField === "sensor", "created with the form's meta field");
  await page.goto(`${base}/ui/#/collections`);

  step("collection page");
  await row.locator("a").click();
  const countEl = page.getByTestId("stat-count");
  await countEl.waitFor();
  const before = Number((await countEl.textContent()).replace(/,/g, ""));
  const summary = await api("GET", `/v1/collections/${coll}`);
  check(before === summary.body.count, `count shown ${before} = API count ${summary.body.count}`);

  step("rollups: a bad window shows the API's message and creates nothing");
  const rollupName = `${coll}_hourly`;
  const addRollup = page.locator("form.add-rollup");
  await addRollup.locator("input[name=rollup-name]").fill(`${coll}_bad`);
  await addRollup.locator("input[name=window]").fill("fortnight");
  await addRollup.getByRole("button", { name: "Add rollup" }).click();
  const badWindow = { window: "fortnight", fields: ["temp"], funcs: ["min", "avg", "max", "count"] };
  const winErr = await api("PUT", `/v1/collections/${coll}/rollups/${coll}_bad`, badWindow);
  check(winErr.status === 400 && /window/.test(winErr.body.error.message), `the API refuses the window: ${JSON.stringify(winErr.body)}`);
  await addRollup.locator(".field-error", { hasText: winErr.body.error.message }).waitFor();
  check(await addRollup.locator("input[name=window]").getAttribute("aria-invalid") === "true", "the window is marked invalid");
  check((await api("GET", `/v1/collections/${coll}/rollups`)).body.length === 0, "no rollup after the refusal");
  check((await api("GET", `/v1/collections/${coll}_bad`)).status === 404, "no collection after the refusal");

  step("rollups: add one through the form; it is listed and catches up");
  await addRollup.locator("input[name=rollup-name]").fill(rollupName);
  await addRollup.locator("input[name=window]").fill("1h");
  await addRollup.locator("input[name=field][value=temp]").check();
  await addRollup.locator("input[name=func][value=sum]").check();
  await addRollup.getByRole("button", { name: "Add rollup" }).click();
  await page.locator(".notice.ok", { hasText: `Rollup ${rollupName} created` }).waitFor();
  const rollupRow = page.locator(`tr[data-rollup="${rollupName}"]`);
  check(await rollupRow.count() === 1, "the list is read again on success");
  check(await addRollup.locator(".field-error").count() === 0, "the refusal's message is gone");
  const listed = (await api("GET", `/v1/collections/${coll}/rollups`)).body;
  check(listed.length === 1 && listed[0].name === rollupName && listed[0].spec.window === "1h"
    && listed[0].spec.fields.join() === "temp" && listed[0].spec.funcs.join() === "count,sum,avg,min,max", `the API lists it: ${JSON.stringify(listed)}`);
  check(/temp × count, sum, avg, min, max/.test(await rollupRow.textContent()), "the row shows fields × funcs");
  await rollupRow.locator('td[data-col="lag"]', { hasText: /^caught up$/ }).waitFor({ timeout: 30_000 });
  check((await api("GET", `/v1/collections/${coll}/rollups`)).body[0].lagSeconds === 0, "the API says caught up too");
  await shot("collection-rollups");

  step("a bad TTL value shows the API's message next to the field");
  await page.locator('tr[data-rule=""] button[data-action="change"]').click();
  const ttlField = page.locator("tr.editor input.ttl-value");
  await ttlField.fill("-5");
  await page.locator("tr.editor").getByRole("button", { name: "Preview change" }).click();
  const want = (await api("POST", `/v1/collections/${coll}/ttl/preview`, { expireAfterSeconds: -5 })).body.error.message;
  check(/must be within \[0, 2147483647\]/.test(want), `the API refuses -5: ${want}`);
  await page.locator("tr.editor .field-error", { hasText: want }).waitFor();
  check(await ttlField.getAttribute("aria-invalid") === "true", "the field is marked invalid");
  await shot("collection-error");
  await ttlField.press("Escape");
  await page.locator("tr.editor").waitFor({ state: "detached" });
  check(await page.evaluate(() => document.activeElement?.dataset.action) === "change", "Escape closes the editor and gives the focus back to Change");

  step(`add a one-day rule for ${sensor}: dry run, confirm`);
  const add = page.locator("form.add-rule");
  await add.locator("select[name=sensor] option", { hasText: sensor }).first().waitFor({ state: "attached" });
  await add.locator("select[name=sensor]").selectOption({ label: sensor });
  await add.locator("input.ttl-value").fill("1");
  await add.getByLabel("Expire after: unit").selectOption({ label: "days" });
  await add.locator("input[name=name]").fill(`${sensor}_day`);
  await add.getByRole("button", { name: "Preview rule" }).click();
  const figure = add.locator('[data-testid="dry-run"] .dry-run-figure');
  await figure.waitFor();
  const figText = await figure.textContent();
  const pv = (await api("POST", `/v1/collections/${coll}/ttl/preview`, { newIndex: { key: { timestamp: 1 }, name: `${sensor}_day`, expireAfterSeconds: 86400, partialFilterExpression: { sensor } } })).body;
  const rule = pv.rules.find((r) => r.index === `${sensor}_day`);
  check(rule && rule.measurements === expectDelete && rule.buckets > 1, `the API's dry run: ${JSON.stringify(pv)}`);
  check(figText.includes(`This will delete ${fmt.format(expectDelete)} measurements in ${fmt.format(rule.buckets)} buckets now`), `dry-run figure: ${figText}`);
  await shot("collection-dry-run");
  await add.locator('[data-action="confirm"]').click();
  await page.locator(`tr[data-rule="${sensor}_day"]`).waitFor();
  await page.locator(".notice.ok", { hasText: `Rule ${sensor}_day created` }).waitFor();

  step("run a TTL pass: the count drops by the dry-run figure");
  await page.locator('.page-head [data-action="ttl-run"]').click();
  await page.locator(".notice.ok", { hasText: "TTL pass done" }).waitFor();
  const after = fmt.format(before - expectDelete);
  await page.locator('[data-testid="stat-count"]', { hasText: new RegExp(`^${after}$`) }).waitFor();
  await shot("collection");

  step("explore: the chart is drawn for a known series");
  await page.goto(`${base}/ui/#/explore?c=${coll}&s=${encodeURIComponent('"north"')}&field=temp&range=all`);
  const canvas = page.locator('[data-testid="chart"] canvas');
  await canvas.waitFor();
  const painted = () => canvas.evaluate((c) => {
    const d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
    let n = 0;
    for (let i = 0; i < d.length; i += 4) {
      // The average line's colour, #1f5fd6.
      if (Math.abs(d[i] - 31) < 40 && Math.abs(d[i + 1] - 95) < 40 && Math.abs(d[i + 2] - 214) < 40 && d[i + 3] > 200) n++;
    }
    return n;
  });
  const n0 = await painted();
  check(n0 > 300, `the average line is drawn (${n0} pixels)`);
  const sumText = await page.locator(".summary").textContent();
  check(/temp · north · 2,880 measurements/.test(sumText), `summary: ${sumText}`);
  await shot("explore");

  step("explore: the sensor whose raw data expired is read from the rollup");
  await page.goto(`${base}/ui/#/explore?c=${coll}&s=${encodeURIComponent(JSON.stringify(sensor))}&field=temp&range=7d`);
  const note = page.getByTestId("rollup-note");
  await note.waitFor();
  const noteText = await note.textContent();
  check(/from rollup .*_hourly, 1h windows/i.test(noteText), `the caption names the rollup: ${noteText}`);
  const rollupSum = await page.locator(".summary").textContent();
  check(rollupSum.includes(`temp · ${sensor} · ${fmt.format(expectDelete)} measurements`), `the rollup's counts add up to what expired: ${rollupSum}`);
  await canvas.waitFor();
  const nr = await painted();
  check(nr > 100, `the average line is drawn from the rollup (${nr} pixels)`);
  await shot("explore-rollup");
  await page.goto(`${base}/ui/#/explore?c=${coll}&s=${encodeURIComponent('"north"')}&field=temp&range=all`);
  await page.locator(".summary", { hasText: "temp · north · 2,880 measurements" }).waitFor();
  await canvas.waitFor();

  step("explore: zoom by dragging, table view, downloads");
  const box = await canvas.boundingBox();
  await page.mouse.move(box.x + box.width * 0.4, box.y + box.height / 2);
  await page.mouse.down();
  await page.mouse.move(box.x + box.width * 0.6, box.y + box.height / 2, { steps: 5 });
  await page.mouse.up();
  await page.locator(".summary", { hasNotText: "2,880 measurements" }).waitFor();
  check(await page.locator("select[name=range]").inputValue() === "custom", "zoom sets a custom range");
  check(await painted() > 100, "the zoomed chart is drawn");
  await page.getByRole("tab", { name: "Table" }).click();
  const rows = await page.locator("#panel-table tbody tr").count();
  check(rows > 0, `table rows: ${rows}`);
  const title = await page.locator("#panel-table tbody time").first().getAttribute("title");
  check(/ UTC$/.test(title), `times carry UTC on hover: ${title}`);
  await shot("explore-table");
  const [csv] = await Promise.all([page.waitForEvent("download"), page.getByRole("button", { name: "Download CSV" }).click()]);
  const csvText = readFileSync(await csv.path(), "utf8");
  check(csvText.startsWith("timestamp,temp_min,temp_avg,temp_max,temp_count"), `CSV header: ${csvText.slice(0, 60)}`);
  const [arrow] = await Promise.all([page.waitForEvent("download"), page.getByRole("button", { name: "Download Arrow" }).click()]);
  const arrowBytes = readFileSync(await arrow.path());
  check(arrowBytes.readUInt32LE(0) === 0xffffffff, "Arrow IPC stream starts with a continuation marker");

  step("the rollup's page names its source; stop it from the source's page");
  await page.goto(`${base}/ui/#/collections/${rollupName}`);
  const of = page.getByTestId("rollup-of");
  await of.waitFor();
  check(/^rollup of \S+ \(window 1h;/.test(await of.textContent()), `the note: ${await of.textContent()}`);
  await shot("collection-rollup-of");
  await of.getByRole("link", { name: coll }).click();
  await page.locator("h1", { hasText: coll }).waitFor();
  await rollupRow.locator('[data-action="stop"]').click();
  await page.locator('tr.editor [data-action="confirm"]', { hasText: `Stop ${rollupName}` }).click();
  await page.locator(".notice.ok", { hasText: `Rollup ${rollupName} stopped` }).waitFor();
  check(await rollupRow.count() === 0, "the list is read again after Stop");
  check((await api("GET", `/v1/collections/${coll}/rollups`)).body.length === 0, "no rollup left after Stop");
  const kept = await api("GET", `/v1/collections/${rollupName}`);
  check(kept.status === 200 && kept.body.count > 0 && !kept.body.options.rollupOf, `the rollup's collection stays: ${JSON.stringify(kept.body)}`);
  // The list is read again while the page is open, with nothing done.
  const readsIdle = rollupReads;
  await page.waitForTimeout(3500);
  check(rollupReads >= readsIdle + 1, `the list is polled while the page is open (${rollupReads - readsIdle} reads in 3.5 s)`);

  step("a suspended collection: delete the out-of-range data, expiry resumes");
  await page.goto(`${base}/ui/#/collections/legacy`);
  await page.locator(".notice.warning", { hasText: "Expiry suspended" }).waitFor();
  await page.locator('[data-action="fix-range"]').click();
  await page.locator('[data-testid="dry-run"] .dry-run-figure', { hasText: "This will delete 1 measurement now" }).waitFor();
  await shot("collection-suspended");
  await page.locator('[data-testid="dry-run"] [data-action="confirm"]').click();
  await page.locator(".notice.ok", { hasText: "expiry resumes" }).waitFor();
  // The page reloads the collection after the notice: wait for it.
  await page.locator(".notice.warning").first().waitFor({ state: "detached", timeout: 10000 }).catch(() => {});
  check(await page.locator(".notice.warning").count() === 0, "the warning is gone");
  const legacy = await api("GET", "/v1/collections/legacy");
  check(legacy.body.ttl.suspended === false && legacy.body.count === 1, `legacy after the delete: ${JSON.stringify(legacy.body.ttl)}`);

  step("archiving suspended: the archive cannot be written");
  await page.goto(`${base}/ui/#/collections/archived`);
  await page.locator('[data-testid="archive-suspended"]', { hasText: "Archiving suspended" }).waitFor();
  check(await page.locator('[data-action="fix-range"]').count() === 0, "no out-of-range fix is offered for an archive that cannot be written");
  await page.locator('[data-testid="archive-suspended"]', { hasText: "cannot be written" }).waitFor();
  await page.locator('[data-testid="stat-archived"]', { hasText: "0" }).waitFor();

  step("server page: counters, charts, operations");
  await page.goto(`${base}/ui/#/server`);
  await page.locator(".stat dt", { hasText: "TTL passes" }).waitFor();
  await page.locator('.page-head [data-action="ttl-run"]').click();
  await page.locator("p[role=status]", { hasText: "TTL pass done" }).waitFor();
  // Ingest while the page samples, so that the rate chart has something.
  const updated = page.locator(".ops .help time");
  for (let i = 0; i < 2; i++) {
    const prev = await updated.getAttribute("datetime");
    const now = Date.now();
    const docs = Array.from({ length: 500 }, (_, k) => ({ timestamp: { $date: new Date(now - k * 10).toISOString() }, sensor: "east", temp: 15 + (k % 7) }));
    const r = await api("POST", `/v1/collections/${coll}/documents`, docs);
    check(r.status === 200, `insert: ${r.status}`);
    await page.waitForFunction((p) => document.querySelector(".ops .help time")?.getAttribute("datetime") !== p, prev);
  }
  const passes = await page.locator(".stat", { hasText: "TTL passes" }).locator("dd").textContent();
  // Left the collection's page long ago: its rollups are not read any more.
  const readsLeft = rollupReads;
  await page.waitForTimeout(3500);
  check(rollupReads === readsLeft, `polling stops when the page is left (${rollupReads - readsLeft} reads after)`);
  check(/^[1-9]/.test(passes), `TTL passes shown: ${passes}`);
  await shot("server");

  check(pageErrors.length === 0, `no errors in the page: ${pageErrors.join("; ")}`);
  step("all checks passed");
} catch (e) {
  // What the page showed when the check failed.
  await context.pages()[0]?.screenshot({ path: join(shots, "failure.png"), fullPage: true }).catch(() => {});
  throw e;
} finally {
  await context.close();
  rmSync(userDir, { recursive: true, force: true });
}
