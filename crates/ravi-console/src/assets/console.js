// The Ravi operator console. Plain JavaScript, no build step, no third-party code.
// Every value from the server is put on the page as text (textContent, never innerHTML), so
// arguments holding markup or scripts stay text.
"use strict";

const BASE = "/console";
const API = BASE + "/api";
const FOLD_CHARS = 300; // longer strings in arguments are folded

/** el("div", {class: "x"}, "text", child, ...): an element; strings become text nodes. */
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else if (k === "class") node.className = v;
    else node.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

/** Appends `items` to `parent`, skipping null/false and flattening arrays (DOM `append` would
 *  write them as text). */
function add(parent, ...items) {
  for (const i of items.flat()) {
    if (i === null || i === undefined || i === false) continue;
    parent.append(i);
  }
}

function announce(text) {
  const s = document.getElementById("status");
  if (s) s.textContent = text;
}

function fmtTime(ms) {
  return ms ? new Date(ms).toLocaleString() : "—";
}

function fmtDuration(ms) {
  if (ms === null || ms === undefined) return "—";
  if (ms < 1000) return ms + " ms";
  const s = ms / 1000;
  if (s < 60) return s.toFixed(1) + " s";
  const m = Math.floor(s / 60);
  return m + " min " + Math.round(s % 60) + " s";
}

function fmtBytes(n) {
  if (n < 1024) return n + " B";
  if (n < 1024 * 1024) return (n / 1024).toFixed(1) + " KiB";
  return (n / 1024 / 1024).toFixed(1) + " MiB";
}

// ---------------------------------------------------------------------------------------------
// Sign-in page

async function loginPage() {
  const form = document.getElementById("login-form");
  const err = document.getElementById("login-error");
  document.getElementById("token").focus();
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    err.textContent = "";
    const token = document.getElementById("token").value;
    const r = await fetch(API + "/login", {
      method: "POST",
      headers: {"content-type": "application/json"},
      body: JSON.stringify({token}),
      credentials: "same-origin",
    });
    if (r.ok) {
      location.href = BASE + "/#/inbox";
      return;
    }
    const body = await r.json().catch(() => ({}));
    err.textContent = body.error || ("sign-in failed (" + r.status + ")");
  });
}

// ---------------------------------------------------------------------------------------------
// The console

const state = {session: null, approvals: [], view: null, refreshTimer: null};

async function api(path, options) {
  const opts = Object.assign({credentials: "same-origin", headers: {}}, options || {});
  if (opts.method && opts.method !== "GET") {
    opts.headers["x-csrf-token"] = state.session ? state.session.csrf : "";
    opts.headers["content-type"] = "application/json";
  }
  const r = await fetch(API + path, opts);
  if (r.status === 401) {
    location.href = BASE + "/login";
    throw new Error("signed out");
  }
  const body = await r.json().catch(() => ({}));
  return {ok: r.ok, status: r.status, body};
}

function riskBadge(risk) {
  return el("span", {class: "badge risk-" + risk}, risk);
}

function stateBadge(s) {
  return el("span", {class: "badge state-" + s}, (s || "").replace(/_/g, " "));
}

/** Adds an artifact's size, type and the start of its text to `box`, when this console can
 *  read it. */
async function describeArtifact(box, runId, ref) {
  const r = await api("/runs/" + encodeURIComponent(runId) + "/artifacts/" + encodeURIComponent(ref) + "/info").catch(() => null);
  if (!r || !r.ok) {
    box.append(" (not readable here)");
    return;
  }
  box.append(" (" + fmtBytes(r.body.size) + ", " + r.body.media_type + ")");
  if (r.body.preview !== null) box.append(el("span", {class: "artifact-preview"}, r.body.preview));
}

function artifactUrl(runId, ref) {
  return API + "/runs/" + encodeURIComponent(runId) + "/artifacts/" + encodeURIComponent(ref);
}

/** Arguments as an indented JSON tree, long strings folded, artifact refs linked. */
function renderJson(value, indent, runId) {
  indent = indent || "";
  const pad = indent + "  ";
  if (value === null || typeof value !== "object") {
    if (typeof value === "string" && value.length > FOLD_CHARS) {
      return el("details", {class: "fold"},
        el("summary", {}, JSON.stringify(value.slice(0, 120)) + "… (" + value.length + " characters)"),
        el("span", {class: "full"}, JSON.stringify(value)));
    }
    return el("span", {class: "v-" + (value === null ? "null" : typeof value)}, JSON.stringify(value));
  }
  if (!Array.isArray(value) && Object.keys(value).length === 1 && typeof value["$artifact"] === "string") {
    const ref = value["$artifact"];
    const box = el("span", {class: "artifact-ref"},
      el("a", {class: "artifact", href: artifactUrl(runId, ref), download: true}, "artifact " + ref));
    describeArtifact(box, runId, ref);
    return box;
  }
  const entries = Array.isArray(value) ? value.map((v, i) => [i, v]) : Object.entries(value);
  const [open, close] = Array.isArray(value) ? ["[", "]"] : ["{", "}"];
  if (entries.length === 0) return document.createTextNode(open + close);
  const frag = el("span", {});
  frag.append(open + "\n");
  entries.forEach(([k, v], i) => {
    frag.append(pad);
    if (!Array.isArray(value)) frag.append(el("span", {class: "key"}, JSON.stringify(k)), ": ");
    frag.append(renderJson(v, pad, runId));
    frag.append((i < entries.length - 1 ? "," : "") + "\n");
  });
  frag.append(indent + close);
  return frag;
}

function timeLeft(deadline) {
  const left = Math.max(0, deadline - Date.now());
  const s = Math.round(left / 1000);
  return s >= 60 ? Math.floor(s / 60) + " min " + (s % 60) + " s" : s + " s";
}

function approvalCard(a) {
  const req = a.request;
  const id = "card-" + a.id;
  const error = el("p", {class: "error", role: "alert"});
  const reason = el("textarea", {id: id + "-reason", rows: 2, maxlength: 2000});
  const always = a.can_always
    ? el("input", {type: "checkbox", id: id + "-always"})
    : null;
  const decide = async (approve) => {
    error.textContent = "";
    const body = {approve, digest: req.args_digest, reason: reason.value || null,
      always: !!(always && always.checked && approve)};
    const r = await api("/approvals/" + encodeURIComponent(a.id), {method: "POST", body: JSON.stringify(body)});
    if (r.ok) {
      announce((approve ? "Approved " : "Denied ") + req.tool);
      removeCard(a.id);
    } else {
      error.textContent = r.body.error || ("failed (" + r.status + ")");
    }
  };
  const source = req.source === "code_mode"
    ? "code-mode script" + (req.line ? ", line " + req.line : "")
    : (req.source || "direct").replace(/_/g, " ");
  return el("article", {class: "card", id, "data-approval": a.id, "aria-labelledby": id + "-title"},
    el("h2", {id: id + "-title"}, el("span", {class: "tool"}, req.tool), " ", riskBadge(req.risk)),
    el("dl", {class: "facts"},
      el("dt", {}, "Asked by"), el("dd", {}, a.requester || "—"),
      el("dt", {}, "Run"), el("dd", {}, el("a", {href: "#/runs/" + encodeURIComponent(a.key.run_id)}, a.key.run_id), " · call " + a.key.seq),
      el("dt", {}, "From"), el("dd", {}, source),
      el("dt", {}, "Why"), el("dd", {}, req.reason),
      el("dt", {}, "Time left"), el("dd", {class: "time-left", "data-deadline": a.deadline_ms}, timeLeft(a.deadline_ms)),
      a.separate ? [el("dt", {}, "Separate"), el("dd", {}, "the requester may not approve it")] : null),
    el("h3", {}, "Arguments"),
    el("pre", {class: "args", tabindex: 0, "aria-label": "arguments"}, renderJson(req.arguments, "", a.key.run_id)),
    el("p", {class: "digest"}, "digest " + req.args_digest),
    el("form", {class: "decide", onsubmit: (e) => e.preventDefault()},
      el("label", {for: id + "-reason"}, "Reason (optional)"), reason,
      always ? el("label", {class: "check", for: id + "-always"}, always, " Always for this tool in this run") : null,
      el("div", {class: "buttons"},
        el("button", {type: "button", class: "approve", onclick: () => decide(true)}, "Approve"),
        el("button", {type: "button", class: "deny", onclick: () => decide(false)}, "Deny"))),
    error);
}

function removeCard(id) {
  state.approvals = state.approvals.filter((a) => a.id !== id);
  const card = document.querySelector('[data-approval="' + CSS.escape(id) + '"]');
  if (card) card.remove();
  updateCount();
  if (state.view === "inbox") emptyNote();
}

function updateCount() {
  const c = document.getElementById("inbox-count");
  c.textContent = String(state.approvals.length);
  c.setAttribute("aria-label", state.approvals.length + " pending");
}

function emptyNote() {
  const list = document.getElementById("cards");
  const note = document.getElementById("empty");
  if (!list || !note) return;
  note.hidden = list.children.length > 0;
}

/** Brings the inbox in line with `state.approvals`: new cards added, decided ones removed,
 *  cards still pending left as they are (a reason being typed survives). */
function syncInbox() {
  const list = document.getElementById("cards");
  if (!list) return;
  const want = new Set(state.approvals.map((a) => a.id));
  for (const card of [...list.children]) {
    if (!want.has(card.dataset.approval)) card.remove();
  }
  const have = new Set([...list.children].map((c) => c.dataset.approval));
  for (const a of state.approvals) {
    if (!have.has(a.id)) {
      list.append(approvalCard(a));
      announce("New approval: " + a.request.tool);
    }
  }
  emptyNote();
}

function viewInbox(main) {
  add(main,
    el("h1", {}, "Pending approvals"),
    el("p", {id: "empty", class: "muted"}, "Nothing is waiting for a decision."),
    el("div", {id: "cards", class: "cards"}));
  syncInbox();
}

async function viewRuns(main, params) {
  const q = new URLSearchParams(params);
  const status = el("select", {id: "f-status", name: "status"},
    ["", "running", "paused", "succeeded", "failed", "cancelled"].map((s) =>
      el("option", {value: s, selected: q.get("status") === s}, s || "any")));
  const kind = el("select", {id: "f-kind", name: "kind"},
    ["", "script", "agent", "serve"].map((s) => el("option", {value: s, selected: q.get("kind") === s}, s || "any")));
  const principal = el("input", {id: "f-principal", name: "principal", value: q.get("principal") || ""});
  const form = el("form", {class: "filters", onsubmit: (e) => {
    e.preventDefault();
    const p = new URLSearchParams();
    if (status.value) p.set("status", status.value);
    if (kind.value) p.set("kind", kind.value);
    if (principal.value) p.set("principal", principal.value);
    location.hash = "#/runs" + (p.toString() ? "?" + p : "");
  }},
    el("label", {for: "f-status"}, "Status"), status,
    el("label", {for: "f-kind"}, "Kind"), kind,
    el("label", {for: "f-principal"}, "Principal"), principal,
    el("button", {type: "submit"}, "Filter"));
  add(main, el("h1", {}, "Runs"), form);
  const r = await api("/runs?" + q);
  if (!r.ok) {
    add(main, el("p", {class: "error", role: "alert"}, r.body.error || "could not list runs"));
    return;
  }
  if (r.body.length === 0) {
    add(main, el("p", {class: "muted"}, "No runs match."));
    return;
  }
  add(main, el("div", {class: "scroll"}, el("table", {class: "runs"},
    el("caption", {class: "sr-only"}, "Runs, newest first"),
    el("thead", {}, el("tr", {}, ["Run", "Kind", "Status", "Principals", "Started", "Duration", "Calls", "In doubt"].map((h) => el("th", {scope: "col"}, h)))),
    el("tbody", {}, r.body.map((run) => el("tr", {},
      el("td", {}, el("a", {href: "#/runs/" + encodeURIComponent(run.id)}, run.id)),
      el("td", {}, run.kind),
      el("td", {}, stateBadge(run.status)),
      el("td", {}, run.principals.join(", ") || "—"),
      el("td", {}, fmtTime(run.created_ms)),
      el("td", {}, fmtDuration(run.duration_ms)),
      el("td", {}, String(run.calls)),
      el("td", {}, run.in_doubt ? el("span", {class: "badge state-in_doubt"}, String(run.in_doubt)) : "0")))))));
}

function callItem(c, runId) {
  const a = c.approval;
  return el("li", {class: "call call-" + c.state, "data-seq": c.seq},
    el("h3", {}, "#" + c.seq + " ", el("span", {class: "tool"}, c.tool), " ", stateBadge(c.state), " ", riskBadge(c.risk)),
    el("dl", {class: "facts"},
      el("dt", {}, "Duration"), el("dd", {}, fmtDuration(c.duration_ms)),
      el("dt", {}, "Principal"), el("dd", {}, c.principal || "—"),
      el("dt", {}, "Arguments digest"), el("dd", {class: "digest"}, c.args_digest),
      a ? [el("dt", {}, "Approval"), el("dd", {class: "approval"},
        stateBadge(a.state), a.decided_by ? " by " + a.decided_by : "", a.reason ? " — " + a.reason : "")] : null,
      c.reason ? [el("dt", {}, "Reason"), el("dd", {}, c.reason)] : null),
    c.in_doubt_check ? el("p", {class: "warning", role: "note"}, c.in_doubt_check) : null,
    c.preview !== null && c.preview !== undefined
      ? el("details", {class: "result", open: c.preview.length < 400},
          el("summary", {}, "Result" + (c.preview_cut ? " (first part)" : "")),
          el("pre", {tabindex: 0}, c.preview))
      : null,
    c.artifact ? el("div", {class: "artifact-box"},
      el("p", {}, "Stored result: " + c.artifact.ref + " · " + fmtBytes(c.artifact.size) + " · " + c.artifact.media_type + " · ",
        el("a", {href: artifactUrl(runId, c.artifact.ref), download: true}, "Download")),
      el("pre", {tabindex: 0}, c.artifact.preview)) : null);
}

async function viewRun(main, id) {
  const r = await api("/runs/" + encodeURIComponent(id));
  if (!r.ok) {
    add(main, el("h1", {}, "Run " + id), el("p", {class: "error", role: "alert"}, r.body.error || "not found"));
    return;
  }
  const {run, calls, source, output, pending} = r.body;
  add(main,
    el("p", {}, el("a", {href: "#/runs"}, "← Runs")),
    el("h1", {}, "Run ", el("span", {class: "mono"}, run.id), " ", stateBadge(run.status)),
    el("dl", {class: "facts"},
      el("dt", {}, "Kind"), el("dd", {}, run.kind),
      el("dt", {}, "Started"), el("dd", {}, fmtTime(run.created_ms)),
      el("dt", {}, "Duration"), el("dd", {}, fmtDuration(run.duration_ms)),
      el("dt", {}, "Calls"), el("dd", {}, String(run.calls)),
      el("dt", {}, "Principals"), el("dd", {}, run.principals.join(", ") || "—")),
    pending.length ? el("p", {class: "warning"}, pending.length + " call(s) wait for approval: ", el("a", {href: "#/inbox"}, "open the inbox")) : null,
    el("h2", {}, "Calls"),
    calls.length ? el("ol", {class: "timeline"}, calls.map((c) => callItem(c, run.id))) : el("p", {class: "muted"}, "No calls yet."),
    source ? el("details", {class: "source"}, el("summary", {}, "Script"), el("pre", {tabindex: 0}, source)) : null,
    output ? [el("h2", {}, "Output" + (output.cut ? " (first part)" : "")), el("pre", {class: "output", tabindex: 0}, output.text)] : null);
}

async function viewHealth(main) {
  add(main, el("h1", {}, "Health"));
  const r = await api("/health");
  if (!r.ok) {
    add(main, el("p", {class: "error", role: "alert"}, r.body.error || "unavailable"));
    return;
  }
  add(main, el("h2", {}, "Upstream servers"));
  if (r.body.upstreams.length === 0) add(main, el("p", {class: "muted"}, "No MCP servers attached."));
  else add(main, el("div", {class: "scroll"}, el("table", {},
    el("thead", {}, el("tr", {}, ["Server", "State", "Since", "Failures", "Last error"].map((h) => el("th", {scope: "col"}, h)))),
    el("tbody", {}, r.body.upstreams.map((u) => el("tr", {},
      el("td", {}, u.server), el("td", {}, stateBadge(u.up ? "up" : "down")),
      el("td", {}, fmtTime(u.since_ms)), el("td", {}, String(u.failures)), el("td", {}, u.last_error || "—")))))));
  add(main, el("h2", {}, "Metrics"));
  if (!r.body.metrics) {
    add(main, el("p", {class: "muted"}, "No metrics in this process."));
    return;
  }
  const rows = r.body.metrics.split("\n").filter((l) => l && !l.startsWith("#")).map((l) => {
    const at = l.lastIndexOf(" ");
    return [l.slice(0, at), l.slice(at + 1)];
  });
  add(main, el("div", {class: "scroll"}, el("table", {class: "metrics"},
    el("thead", {}, el("tr", {}, el("th", {scope: "col"}, "Series"), el("th", {scope: "col"}, "Value"))),
    el("tbody", {}, rows.map(([k, v]) => el("tr", {}, el("td", {class: "mono"}, k), el("td", {}, v)))))));
}

async function route() {
  const hash = location.hash || "#/inbox";
  const [path, query] = hash.slice(1).split("?");
  const parts = path.split("/").filter(Boolean);
  const main = document.getElementById("main");
  const view = parts[0] || "inbox";
  state.view = view === "runs" && parts[1] ? "run" : view;
  state.viewArgs = {id: parts[1] ? decodeURIComponent(parts[1]) : null, query: query || ""};
  for (const a of document.querySelectorAll("[data-nav]")) {
    if (a.dataset.nav === view) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  await render(main, true);
}

async function render(main, focus) {
  const fresh = el("div", {});
  if (state.view === "run") await viewRun(fresh, state.viewArgs.id);
  else if (state.view === "runs") await viewRuns(fresh, state.viewArgs.query);
  else if (state.view === "health") await viewHealth(fresh);
  else {
    state.view = "inbox";
    main.replaceChildren();
    viewInbox(main);
    if (focus) main.focus();
    return;
  }
  // Keep open <details> and the scroll position when a live page re-renders.
  const open = new Set([...main.querySelectorAll("details[open]")].map((d) => d.closest("[data-seq]")?.dataset.seq + d.className));
  main.replaceChildren(...fresh.childNodes);
  if (!focus) {
    for (const d of main.querySelectorAll("details")) {
      if (open.has(d.closest("[data-seq]")?.dataset.seq + d.className)) d.open = true;
    }
  } else {
    main.focus();
  }
}

/** Re-renders a live page (runs, a run, health) soon after activity, at most every 300 ms. */
function activity() {
  if (state.view === "inbox" || state.refreshTimer) return;
  state.refreshTimer = setTimeout(() => {
    state.refreshTimer = null;
    const main = document.getElementById("main");
    // Not while someone is using a form on the page.
    if (main.contains(document.activeElement) && document.activeElement.matches("input, select, textarea")) return;
    render(main, false);
  }, 300);
}

function connect() {
  const events = new EventSource(API + "/events");
  events.addEventListener("approvals", (e) => {
    state.approvals = JSON.parse(e.data);
    updateCount();
    if (state.view === "inbox") syncInbox();
  });
  events.addEventListener("activity", activity);
  events.onerror = async () => {
    if (events.readyState === EventSource.CLOSED) {
      // Closed for good (signed out, server gone): find out which, then reconnect.
      await api("/session").catch(() => null);
      setTimeout(connect, 2000);
    }
  };
}

async function consolePage() {
  const s = await api("/session");
  if (!s.ok) {
    document.getElementById("main").replaceChildren(el("p", {class: "error", role: "alert"}, s.body.error || "not allowed"));
    return;
  }
  state.session = s.body;
  document.getElementById("who").textContent = s.body.principal;
  document.getElementById("logout").addEventListener("click", async () => {
    await api("/logout", {method: "POST", body: "{}"});
    location.href = BASE + "/login";
  });
  const a = await api("/approvals");
  if (a.ok) state.approvals = a.body;
  updateCount();
  window.addEventListener("hashchange", route);
  await route();
  connect();
  // The cards' countdowns: a clock on the page, not a request.
  setInterval(() => {
    for (const t of document.querySelectorAll(".time-left")) {
      t.textContent = timeLeft(Number(t.dataset.deadline));
    }
  }, 1000);
}

document.addEventListener("DOMContentLoaded", () => {
  if (document.body.dataset.page === "login") loginPage();
  else consolePage();
});
