// The operator console in a real browser: headless Chromium (the OS's) driven by Playwright's
// library. Started by crates/ravi-cli/tests/suite/console.rs, which sets up the store, the
// keys, `ravi serve --console` and a run left with a call in doubt, and passes them in the
// environment. This script starts the code-mode runs itself (`ravi run --approve queue`) so
// the pages are open before the approvals arrive. Any failed expectation throws; the exit code
// tells the Rust test. On success the last line is a JSON report of what was measured.
"use strict";

const {chromium} = require("playwright-core");
const {spawn} = require("node:child_process");
const path = require("node:path");

const env = (k) => {
  const v = process.env[k];
  if (!v) throw new Error(`missing environment variable ${k}`);
  return v;
};
const URL = env("CONSOLE_URL");
const ALICE = env("KEY_ALICE");
const BOB = env("KEY_BOB");
const RAVI = env("RAVI_BIN");
const STORE = env("RAVI_STORE_URL");
const WS = env("WORKSPACE");
const IN_DOUBT_RUN = env("IN_DOUBT_RUN");
const SHOTS = env("SHOTS_DIR");

function expect(cond, what) {
  if (!cond) throw new Error("expectation failed: " + what);
}

/** `ravi run SCRIPT --approve queue` in the background; resolves with its exit and output. */
function ravi_run(script) {
  const child = spawn(RAVI, ["run", script, "--approve", "queue", "--approval-timeout", "60", "--store", STORE], {
    cwd: WS,
    env: Object.assign({}, process.env, {XDG_STATE_HOME: path.join(WS, ".state")}),
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  let err = "";
  child.stdout.on("data", (d) => (out += d));
  child.stderr.on("data", (d) => (err += d));
  const done = new Promise((resolve) => child.on("exit", (code) => resolve({code, out, err})));
  return {child, done};
}

async function within(ms, promise, what) {
  let timer;
  const limit = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms: ${what}`)), ms);
  });
  try {
    return await Promise.race([promise, limit]);
  } finally {
    clearTimeout(timer);
  }
}

async function signIn(page, key) {
  await page.goto(URL + "/console/login");
  await page.getByLabel("API key or access token").fill(key);
  await page.getByRole("button", {name: "Sign in"}).click();
}

/** The API from inside the page (its cookie, its CSRF token). */
async function pageApi(page, method, apiPath, body) {
  return page.evaluate(async ([method, apiPath, body]) => {
    const s = await (await fetch("/console/api/session")).json();
    const r = await fetch("/console/api" + apiPath, {
      method,
      headers: {"content-type": "application/json", "x-csrf-token": s.csrf},
      body: body === null ? undefined : JSON.stringify(body),
    });
    return {status: r.status, body: await r.json().catch(() => null)};
  }, [method, apiPath, body]);
}

async function main() {
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
      "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
  const report = {};
  try {
    const context = await browser.newContext({viewport: {width: 1280, height: 860}});
    const page = await context.newPage();
    let dialogs = 0;
    page.on("dialog", (d) => {
      dialogs++;
      d.dismiss();
    });
    const pageErrors = [];
    page.on("pageerror", (e) => pageErrors.push(String(e)));

    // A principal without the operator role is refused.
    await signIn(page, BOB);
    await page.getByRole("alert").filter({hasText: "not an operator"}).waitFor({timeout: 5000});
    const bobApi = await page.evaluate(async () => (await fetch("/console/api/approvals")).status);
    expect(bobApi === 401, "no session for a refused principal (got " + bobApi + ")");

    // The operator signs in; a second tab shares the session.
    await signIn(page, ALICE);
    await page.waitForURL("**/console/#/inbox");
    await page.getByRole("heading", {name: "Pending approvals"}).waitFor();
    const tab2 = await context.newPage();
    await tab2.goto(URL + "/console/#/inbox");
    await tab2.getByRole("heading", {name: "Pending approvals"}).waitFor();

    // 1. A code-mode run blocks on a Critical call whose arguments carry markup.
    const approveRun = ravi_run("approve.py");
    const card = page.locator("article.card");
    await card.first().waitFor({timeout: 15000});
    const seen = Date.now();
    const pending = await pageApi(page, "GET", "/approvals", null);
    expect(pending.status === 200 && pending.body.length === 1, "one pending approval");
    const approval = pending.body[0];
    report.card_latency_ms = seen - approval.created_ms;
    expect(report.card_latency_ms < 1000, `the card appeared within 1 s (${report.card_latency_ms} ms)`);
    await tab2.locator("article.card").first().waitFor({timeout: 2000});
    // The markup stays text: shown literally, nothing executed, no element made from it.
    const argsText = await card.first().locator("pre.args").innerText();
    expect(argsText.includes("<script>window.__xss=1</script>"), "the script tag is shown as text");
    expect(argsText.includes("<img src=x onerror=window.__xss=2>"), "the img tag is shown as text");
    expect((await card.first().locator("img, script").count()) === 0, "no element from the arguments");
    expect((await page.evaluate(() => window.__xss)) === undefined, "no script ran");
    expect((await card.first().getByText("code-mode script, line 1").count()) === 1, "the script line is shown");
    // Critical: no "always" option.
    expect((await card.first().locator('input[type="checkbox"]').count()) === 0, "no 'always' for Critical");
    // Keyboard: from the reason, Tab reaches Approve, then Deny.
    await card.first().getByLabel("Reason (optional)").focus();
    await page.keyboard.press("Tab");
    expect((await page.evaluate(() => document.activeElement.textContent)) === "Approve", "Tab goes to Approve");
    await page.keyboard.press("Tab");
    expect((await page.evaluate(() => document.activeElement.textContent)) === "Deny", "then to Deny");
    await page.screenshot({path: path.join(SHOTS, "console-inbox.png")});
    const runId = approval.key.run_id;

    // A stale card (other arguments than the stored call) decides nothing.
    const stale = await pageApi(page, "POST", "/approvals/" + approval.id, {approve: true, digest: "0".repeat(64)});
    expect(stale.status === 409, "a stale card is refused (got " + stale.status + ")");
    // No CSRF token: refused.
    const noCsrf = await page.evaluate(async (id) => (await fetch("/console/api/approvals/" + id, {
      method: "POST", headers: {"content-type": "application/json"}, body: "{}"})).status, approval.id);
    expect(noCsrf === 403, "a change without the CSRF token is refused (got " + noCsrf + ")");

    // Approve in tab 1; the card leaves tab 2 too.
    await card.first().getByLabel("Reason (optional)").fill("checked the command");
    const t0 = Date.now();
    await card.first().getByRole("button", {name: "Approve"}).click();
    await tab2.locator("article.card").first().waitFor({state: "detached", timeout: 3000});
    report.other_tab_ms = Date.now() - t0;
    const approved = await within(30000, approveRun.done, "the approved run to finish");
    expect(approved.code === 0, `the approved run succeeded (exit ${approved.code}): ${approved.err}`);

    // Its page shows the call, the decision and the decider.
    await page.goto(URL + "/console/#/runs/" + encodeURIComponent(runId));
    const item = page.locator("ol.timeline > li").first();
    await item.waitFor({timeout: 5000});
    const itemText = await item.innerText();
    expect(itemText.includes("shell"), "the timeline shows the call");
    expect(/consumed\s+by key:alice — checked the command/.test(itemText), "the decision and decider: " + itemText);
    expect(itemText.includes("succeeded"), "the call's outcome");
    await page.screenshot({path: path.join(SHOTS, "console-run.png"), fullPage: true});

    // 2. Deny with a reason: the script sees ToolDenied with it.
    await page.goto(URL + "/console/#/inbox");
    const denyRun = ravi_run("deny.py");
    await card.first().waitFor({timeout: 15000});
    await card.first().getByLabel("Reason (optional)").fill("not on the production host");
    await card.first().getByRole("button", {name: "Deny"}).click();
    await card.first().waitFor({state: "detached", timeout: 3000});
    const denied = await within(30000, denyRun.done, "the denied run to finish");
    expect(denied.code === 0, `the denied run finished (exit ${denied.code}): ${denied.err}`);
    expect(denied.out.includes("DENIED") && denied.out.includes("not on the production host")
      && denied.out.includes("key:alice"), "the script saw the denial with its reason: " + denied.out);

    // 3. "Always for this tool in this run": the second write needs no card (not even one
    // that flickers: every card added to the inbox is counted).
    const alwaysRun = ravi_run("always.py");
    await card.first().waitFor({timeout: 15000});
    expect((await card.count()) === 1, "one card for the first write");
    // Its content is an artifact (the big read): linked, with its size, type and first lines.
    const ref = card.first().locator(".artifact-ref");
    await ref.locator(".artifact-preview").waitFor({timeout: 5000});
    const refText = await ref.innerText();
    expect(/artifact art_\S+ \(\d+\.\d KiB, text\/plain/.test(refText) && refText.includes("0123456789abcdef"),
      "the artifact argument shows size, type and preview: " + refText);
    await page.evaluate(() => {
      window.__cardsAdded = 0;
      new MutationObserver((ms) => {
        for (const m of ms) window.__cardsAdded += [...m.addedNodes].filter((n) => n.matches && n.matches("article.card")).length;
      }).observe(document.getElementById("cards"), {childList: true});
    });
    await card.first().getByLabel("Always for this tool in this run").check();
    await card.first().getByRole("button", {name: "Approve"}).click();
    const always = await within(30000, alwaysRun.done, "the always run to finish");
    expect(always.code === 0, `the always run succeeded (exit ${always.code}): ${always.err}`);
    await page.waitForTimeout(600); // more than two reads of the store
    expect((await page.evaluate(() => window.__cardsAdded)) === 0, "no card for the second write");
    // Its big read was kept as an artifact: the run's page offers it, byte for byte.
    const alwaysId = (await pageApi(page, "GET", "/runs?limit=1", null)).body[0].id;
    const shown = await pageApi(page, "GET", "/runs/" + alwaysId, null);
    const stored = shown.body.calls.map((c) => c.artifact).find((a) => a);
    expect(stored && stored.size > 256 * 1024, "the big read is an artifact: " + JSON.stringify(stored));
    await page.goto(URL + "/console/#/runs/" + encodeURIComponent(alwaysId));
    const link = page.getByRole("link", {name: "Download"});
    await link.waitFor({timeout: 5000});
    const [download] = await Promise.all([page.waitForEvent("download"), link.click()]);
    const size = require("node:fs").statSync(await download.path()).size;
    expect(size === stored.size, `the download has the artifact's ${stored.size} bytes (got ${size})`);

    // 4. The run left by a kill -9 shows its call in doubt, with what to check.
    await page.goto(URL + "/console/#/runs/" + encodeURIComponent(IN_DOUBT_RUN));
    const warning = page.locator("ol.timeline .warning");
    await warning.waitFor({timeout: 5000});
    expect((await warning.innerText()).includes("outcome was never recorded"), "the in-doubt call is flagged");

    // 5. The runs list, filtered; the health page.
    await page.goto(URL + "/console/#/runs?status=succeeded");
    await page.locator("table.runs tbody tr").first().waitFor({timeout: 5000});
    const statuses = await page.locator("table.runs tbody tr td:nth-child(3)").allInnerTexts();
    expect(statuses.length >= 3 && statuses.every((s) => s.trim() === "succeeded"), "filtered by status: " + statuses);
    await page.goto(URL + "/console/#/health");
    await page.getByRole("heading", {name: "Metrics"}).waitFor();
    expect((await page.locator("table.metrics tbody tr").count()) > 0, "metrics are shown");

    // A phone's width: nothing wider than the screen.
    await page.setViewportSize({width: 390, height: 844});
    await page.goto(URL + "/console/#/runs/" + encodeURIComponent(runId));
    await page.locator("ol.timeline > li").first().waitFor();
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    expect(overflow <= 0, `no horizontal scrolling at phone width (${overflow}px too wide)`);
    await page.screenshot({path: path.join(SHOTS, "console-run-phone.png")});

    expect(dialogs === 0, "no dialog opened");
    expect(pageErrors.length === 0, "no script errors: " + pageErrors.join("; "));
  } finally {
    await browser.close();
  }
  console.log(JSON.stringify(report));
}

main().catch((e) => {
  console.error(e && e.stack ? e.stack : String(e));
  process.exit(1);
});
