"use strict";
// herald's dashboard: one page per hash route, built with DOM calls only. Text from
// the server (payloads, prompts, commands: anything a sender or a model wrote) is
// always set as textContent, never parsed as HTML.
//
// Every API call carries the session's secret, which the login left in this tab's
// sessionStorage (scoped to this origin: scheme, host and port). A tab without it (a
// new tab, or a session that ended) goes to the login page.

const SECRET_KEY = "herald-dashboard-secret";
const SECRET = sessionStorage.getItem(SECRET_KEY);
const PAGE = document.getElementById("page");

function toLogin() {
  sessionStorage.removeItem(SECRET_KEY);
  location.replace("/dashboard/login" + location.hash);
}

// ---- small helpers ---------------------------------------------------------------

/** An element with attributes, and children (strings become text nodes). */
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

function svg(tag, attrs) {
  const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
  return node;
}

function when(ms) {
  if (!ms) return "";
  return new Date(ms).toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z");
}

function whenSecs(s) {
  return s ? when(s * 1000) : "";
}

async function api(path, options) {
  const opts = Object.assign({ headers: {} }, options || {});
  opts.headers["X-Dashboard-Secret"] = SECRET;
  if (opts.body && typeof opts.body !== "string") {
    opts.body = JSON.stringify(opts.body);
    opts.headers["Content-Type"] = "application/json";
  }
  const r = await fetch("/dashboard/api" + path, opts);
  if (r.status === 401) {
    toLogin();
    throw new Error("log in again");
  }
  const body = await r.json().catch(() => ({}));
  if (!r.ok) throw new Error(body.error || r.statusText);
  return body;
}

/** Follows a server-sent event stream of the API (fetch, so the secret goes in a
 * header, which EventSource can not send), calling onData with each event's JSON.
 * Ends when the stream does or `signal` aborts. */
async function follow(path, onData, signal) {
  const r = await fetch("/dashboard/api" + path, { headers: { "X-Dashboard-Secret": SECRET }, signal });
  if (r.status === 401) {
    toLogin();
    return;
  }
  if (!r.ok) {
    const body = await r.json().catch(() => ({}));
    throw new Error(body.error || r.statusText);
  }
  const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffered = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffered += value;
    let end;
    while ((end = buffered.indexOf("\n\n")) >= 0) {
      const frame = buffered.slice(0, end);
      buffered = buffered.slice(end + 2);
      const data = frame.split("\n").filter((l) => l.startsWith("data:"))
        .map((l) => l.slice(5).replace(/^ /, "")).join("\n");
      if (data) onData(JSON.parse(data));
    }
  }
}

const LIVE = ["queued", "running", "waiting_for_approval"];

/** A Stop button for run `id`, asking first; `after` runs once it is stopping. */
function stopButton(id, after) {
  return el("button", { type: "button", class: "quiet stop", "data-run": id, onclick: async () => {
    if (!(await confirmed("Stop run " + id + "? Its tool calls are interrupted."))) return;
    try {
      const r = await api("/runs/" + encodeURIComponent(id) + "/stop", { method: "POST" });
      notice("Run " + id + " is " + (r.status || r.state) + ".");
      if (after) await after();
    } catch (e) { notice(e.message, "error"); }
  } }, "Stop");
}

function confirmed(text) {
  const dialog = document.getElementById("confirm");
  document.getElementById("confirm-text").textContent = text;
  return new Promise((resolve) => {
    const yes = document.getElementById("confirm-yes");
    const no = document.getElementById("confirm-no");
    const done = (answer) => {
      yes.onclick = no.onclick = null;
      dialog.close();
      resolve(answer);
    };
    yes.onclick = () => done(true);
    no.onclick = () => done(false);
    dialog.showModal();
  });
}

function notice(text, kind) {
  const n = el("p", { class: "notice " + (kind || "") , role: "status" }, text);
  PAGE.prepend(n);
  setTimeout(() => n.remove(), 6000);
}

function pre(text, cls) {
  return el("pre", { class: cls || "" }, text === undefined || text === null ? "" : text);
}

function json(value) {
  return JSON.stringify(value, null, 2);
}

function stateBadge(state) {
  return el("span", { class: "state " + state }, state);
}

// ---- router ----------------------------------------------------------------------

let leaving = [];

function onLeave(fn) {
  leaving.push(fn);
}

async function route() {
  for (const fn of leaving) fn();
  leaving = [];
  const hash = location.hash.replace(/^#\/?/, "") || "events";
  const [page, arg] = hash.split("/");
  for (const a of document.querySelectorAll("nav a")) {
    a.classList.toggle("active", a.dataset.page === page);
  }
  PAGE.replaceChildren();
  const pages = { events: arg ? eventPage : eventsPage, runs: arg ? runPage : runsPage,
    deliveries: deliveriesPage, routes: routesPage, health: healthPage };
  const show = pages[page] || eventsPage;
  try {
    await show(decodeURIComponent(arg || ""));
  } catch (e) {
    PAGE.append(el("p", { class: "error" }, String(e.message || e)));
  }
}

// ---- events ----------------------------------------------------------------------

const STATES = ["", "queued", "running", "delivering", "delivered", "dead", "cancelled"];

async function eventsPage() {
  const params = new URLSearchParams(location.search);
  const form = el("form", { id: "event-filters", class: "filters" },
    el("input", { name: "q", placeholder: "Search delivery ids, event types, prompts", value: params.get("q") || "", "aria-label": "search" }),
    el("input", { name: "delivery_id", placeholder: "Delivery id", value: params.get("delivery_id") || "" }),
    el("input", { name: "route", placeholder: "Route", value: params.get("route") || "" }),
    el("select", { name: "state", "aria-label": "state" },
      STATES.map((s) => el("option", { value: s }, s || "any state"))),
    el("input", { name: "since", type: "datetime-local", "aria-label": "received after" }),
    el("input", { name: "until", type: "datetime-local", "aria-label": "received before" }),
    el("button", { type: "submit" }, "Find"));
  const table = el("table", { id: "events" },
    el("thead", {}, el("tr", {}, ["Id", "Received", "Route", "Event", "Delivery id", "State", "Prompt"].map((h) => el("th", {}, h)))),
    el("tbody"));
  const more = el("button", { type: "button", id: "more", class: "quiet", hidden: true }, "Older events");
  PAGE.append(el("h1", {}, "Events"), form, table, more);
  let oldest = null;
  const load = async (append) => {
    const data = new FormData(form);
    const q = new URLSearchParams();
    for (const [k, v] of data.entries()) {
      if (!v) continue;
      if (k === "since" || k === "until") q.set(k, String(Date.parse(v + "Z")));
      else q.set(k, v);
    }
    if (append && oldest) q.set("before", String(oldest));
    q.set("limit", "50");
    const body = await api("/events?" + q.toString());
    const rows = body.events.map((e) => el("tr", { "data-id": e.id },
      el("td", {}, el("a", { href: "#/events/" + e.id }, String(e.id))),
      el("td", {}, when(e.received_at_ms)),
      el("td", {}, e.route),
      el("td", {}, e.event_type),
      el("td", { class: "mono" }, e.delivery_id),
      el("td", {}, stateBadge(e.state)),
      el("td", { class: "prompt" }, e.prompt)));
    const tbody = table.querySelector("tbody");
    if (append) tbody.append(...rows);
    else tbody.replaceChildren(...rows);
    if (body.events.length) oldest = body.events[body.events.length - 1].id;
    more.hidden = body.events.length < 50;
  };
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    load(false).catch((e) => notice(e.message, "error"));
  });
  more.addEventListener("click", () => load(true).catch((e) => notice(e.message, "error")));
  await load(false);
}

async function eventPage(id) {
  const body = await api("/events/" + encodeURIComponent(id));
  const e = body.event;
  const actions = el("div", { class: "row" });
  if (["dead", "delivered", "cancelled"].includes(e.state)) {
    actions.append(el("button", { type: "button", id: "replay", onclick: async () => {
      if (!(await confirmed("Replay event " + e.id + "? It runs (or is delivered) again."))) return;
      try {
        const r = await api("/events/" + e.id + "/replay", { method: "POST" });
        await route();
        notice("Event " + e.id + " is " + r.state + " again.");
      } catch (err) { notice(err.message, "error"); }
    } }, "Replay"));
  }
  if (e.state === "queued") {
    actions.append(el("button", { type: "button", id: "cancel", onclick: async () => {
      if (!(await confirmed("Cancel event " + e.id + "? It will not run."))) return;
      try {
        await api("/events/" + e.id + "/cancel", { method: "POST" });
        await route();
        notice("Event " + e.id + " is cancelled.");
      } catch (err) { notice(err.message, "error"); }
    } }, "Cancel"));
  }
  PAGE.append(
    el("p", {}, el("a", { href: "#/events" }, "← Events")),
    el("h1", {}, "Event " + e.id + " ", stateBadge(e.state)),
    actions,
    el("dl", { class: "facts" },
      [["Route", e.route], ["Event", e.event_type], ["Delivery id", e.delivery_id],
      ["Received", when(e.received_at_ms)], ["Changed", when(e.updated_at_ms)],
      ["Runs", e.attempts], ["Deliver", e.deliver], ["Last error", e.last_error || "—"],
    ].flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, v)])),
    el("h2", {}, "Headers"), pre(json(e.headers)),
    el("h2", {}, "Payload"), pre(typeof e.payload === "string" ? e.payload : json(e.payload), "payload"),
    el("h2", {}, "Prompt"), pre(e.prompt, "prompt"),
    el("h2", {}, "Attempts"),
    el("table", { class: "attempts" },
      el("tr", {}, ["Stage", "Started", "Finished", "Outcome", "Error"].map((h) => el("th", {}, h))),
      body.attempts.map((a) => el("tr", {},
        el("td", {}, a.stage), el("td", {}, when(a.started_at_ms)), el("td", {}, when(a.finished_at_ms)),
        el("td", {}, a.outcome), el("td", {}, a.error || "")))),
    el("h2", {}, "Answer"), pre(e.answer || "—", "answer"),
    el("h2", {}, "Deliveries"), deliveriesTable(body.deliveries));
}

function deliveriesTable(list) {
  return el("table", { class: "deliveries" },
    el("tr", {}, ["When", "Kind", "Route", "Delivery id", "Target", "Status", "Attempts", "Error", "Message"].map((h) => el("th", {}, h))),
    list.map((d) => el("tr", {},
      el("td", {}, when(d.created_at_ms)), el("td", {}, d.kind), el("td", {}, d.route),
      el("td", { class: "mono" }, d.delivery_id), el("td", {}, d.target), el("td", {}, stateBadge(d.status)),
      el("td", {}, d.attempts), el("td", {}, d.error || ""), el("td", { class: "prompt" }, d.message))));
}

// ---- runs ------------------------------------------------------------------------

async function runsPage() {
  const [runs, sessions] = await Promise.all([api("/runs"), api("/sessions")]);
  PAGE.append(el("h1", {}, "Runs"),
    el("table", { id: "runs" },
      el("tr", {}, ["Run", "Door", "State", "Started", "Last event", "Waiting", ""].map((h) => el("th", {}, h))),
      runs.runs.map((r) => el("tr", {},
        el("td", {}, el("a", { href: "#/runs/" + encodeURIComponent(r.run_id) }, r.run_id)),
        el("td", {}, r.door), el("td", {}, stateBadge(r.state)), el("td", {}, whenSecs(r.created_at)),
        el("td", {}, r.last_event || ""), el("td", {}, r.pending_approvals ? r.pending_approvals + " approval(s)" : ""),
        el("td", {}, LIVE.includes(r.state) ? stopButton(r.run_id, route) : "")))),
    el("h2", {}, "Stored sessions (read-only)"),
    el("table", { id: "sessions" },
      el("tr", {}, ["Session", "Title", "Source", "Messages", "Updated", "First message"].map((h) => el("th", {}, h))),
      sessions.sessions.map((s) => el("tr", {},
        el("td", { class: "mono" }, s.id), el("td", {}, s.title || ""), el("td", {}, s.source || ""),
        el("td", {}, s.messages), el("td", {}, whenSecs(s.updated_at)), el("td", { class: "prompt" }, s.preview)))));
  const timer = setInterval(() => { if (location.hash.startsWith("#/runs") && !location.hash.includes("/runs/")) route(); }, 5000);
  onLeave(() => clearInterval(timer));
}

async function runPage(id) {
  const log = el("ol", { id: "run-log", class: "log" });
  const waiting = el("div", { id: "approvals" });
  const head = el("h1", {}, "Run " + id);
  const state = el("p", { id: "run-state" });
  const stop = el("div", { class: "row" });
  PAGE.append(el("p", {}, el("a", { href: "#/runs" }, "← Runs")), head, state, stop, waiting, el("h2", {}, "Events"), log);
  let answer = null;
  const ask = (a) => {
    if (document.getElementById("approval-" + a.request_id)) return;
    const box = el("div", { class: "approval", id: "approval-" + a.request_id },
      el("p", {}, "Approve this command? (" + a.reason + ")"), pre(a.command, "command"),
      el("div", { class: "row" }, ["once", "session", "deny"].map((choice) => el("button", {
        type: "button", class: choice === "deny" ? "quiet" : "", "data-choice": choice,
        onclick: async () => {
          try {
            await api("/runs/" + encodeURIComponent(id) + "/approval", { method: "POST", body: { request_id: a.request_id, choice } });
            box.remove();
          } catch (e) { notice(e.message, "error"); }
        } }, choice === "once" ? "Approve once" : choice === "session" ? "Approve for the session" : "Deny"))));
    waiting.append(box);
  };
  const watching = new AbortController();
  onLeave(() => watching.abort());
  const onEvent = (e) => {
    if (e.event === "status") {
      state.replaceChildren("State: ", stateBadge(e.status.state), " · door " + e.status.door);
      stop.replaceChildren(LIVE.includes(e.status.state) ? stopButton(id) : "");
      e.pending.forEach(ask);
      return;
    }
    if (e.event === "message.delta") {
      if (!answer) { answer = pre("", "answer"); log.append(el("li", {}, answer)); }
      answer.textContent += e.delta;
      return;
    }
    answer = null;
    if (e.event === "approval.request") ask(e);
    if (e.event === "approval.responded") {
      const box = document.getElementById("approval-" + e.request_id);
      if (box) box.remove();
    }
    if (e.event.startsWith("run.")) {
      state.replaceChildren("State: ", stateBadge(e.status.state));
      stop.replaceChildren();
      watching.abort();
    }
    const detail = e.tool ? e.tool + " " + (e.arguments || e.result || "") : e.command || e.choice || (e.status && e.status.error) || "";
    log.append(el("li", { class: "event" }, el("span", { class: "name" }, e.event), " ", detail));
  };
  follow("/runs/" + encodeURIComponent(id) + "/events", onEvent, watching.signal).catch((e) => {
    if (e.name !== "AbortError") notice(e.message, "error");
  });
}

// ---- deliveries ------------------------------------------------------------------

async function deliveriesPage() {
  const form = el("form", { class: "filters" },
    el("input", { name: "route", placeholder: "Route" }),
    el("input", { name: "delivery_id", placeholder: "Delivery id" }),
    el("select", { name: "status", "aria-label": "status" },
      ["", "delivered", "failed"].map((s) => el("option", { value: s }, s || "any status"))),
    el("button", { type: "submit" }, "Find"));
  const holder = el("div");
  PAGE.append(el("h1", {}, "Deliveries"), form, holder);
  const load = async () => {
    const q = new URLSearchParams();
    for (const [k, v] of new FormData(form).entries()) if (v) q.set(k, v);
    const body = await api("/deliveries?" + q.toString());
    holder.replaceChildren(deliveriesTable(body.deliveries));
  };
  form.addEventListener("submit", (ev) => { ev.preventDefault(); load().catch((e) => notice(e.message, "error")); });
  await load();
}

// ---- routes ----------------------------------------------------------------------

function trafficChart(minutes) {
  const w = 180, h = 36;
  const chart = svg("svg", { width: w, height: h, viewBox: `0 0 ${w} ${h}`, class: "chart", role: "img" });
  const now = Math.floor(Date.now() / 60000);
  const max = Math.max(1, ...minutes.map((m) => m.accepted + m.ignored + m.failed));
  for (const m of minutes) {
    const x = w - (now - m.minute + 1) * (w / 60);
    let y = h;
    for (const [k, cls] of [["accepted", "ok"], ["ignored", "ignored"], ["failed", "bad"]]) {
      const bar = (m[k] / max) * h;
      if (!bar) continue;
      y -= bar;
      chart.append(svg("rect", { x, y, width: w / 60 - 0.5, height: bar, class: cls }));
    }
  }
  const total = (k) => minutes.reduce((s, m) => s + m[k], 0);
  chart.append(Object.assign(svg("title"), { textContent: `last hour: ${total("accepted")} accepted, ${total("ignored")} ignored, ${total("failed")} failed` }));
  return chart;
}

// The sender presets a route's `source:` may name (docs/senders.md).
const SENDERS = ["stripe", "jira", "shopify", "slack", "linear", "pagerduty", "sentry", "paddle", "bitbucket",
  "gitea", "forgejo", "twilio", "discord", "token", "standard-webhooks", "svix"];

async function routesPage() {
  const body = await api("/routes");
  const form = el("form", { id: "subscribe", class: "filters" },
    el("input", { name: "name", placeholder: "Name", required: true }),
    el("input", { name: "events", placeholder: "Events (comma-separated; all when empty)" }),
    el("input", { name: "prompt", placeholder: "Prompt template" }),
    el("input", { name: "deliver", placeholder: "Deliver (log, telegram, ...)" }),
    el("input", { name: "deliver_chat_id", placeholder: "Chat id" }),
    el("input", { name: "source", placeholder: "Sender preset (stripe, slack, ...; detected when empty)", list: "senders" }),
    el("datalist", { id: "senders" }, SENDERS.map((s) => el("option", { value: s }))),
    el("input", { name: "secret", placeholder: "Secret (the sender's; generated when empty)", autocomplete: "off" }),
    el("input", { name: "public_key", placeholder: "Public key (discord)" }),
    el("input", { name: "public_url", placeholder: "Public URL (twilio)" }),
    el("input", { name: "header", placeholder: "Token header (token; Authorization when empty)" }),
    el("label", {}, el("input", { type: "checkbox", name: "deliver_only" }), " direct"),
    el("button", { type: "submit" }, "Subscribe"));
  const made = el("div", { id: "made" });
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const d = new FormData(form);
    try {
      const r = await api("/routes", { method: "POST", body: {
        name: d.get("name"), prompt: d.get("prompt") || "", deliver: d.get("deliver") || null,
        deliver_chat_id: d.get("deliver_chat_id") || null, deliver_only: d.get("deliver_only") === "on",
        source: d.get("source") || null, public_key: d.get("public_key") || null, public_url: d.get("public_url") || null,
        secret: d.get("secret") || null, header: d.get("header") || null,
        events: String(d.get("events") || "").split(","),
      } });
      made.replaceChildren(el("p", { class: "notice" }, "Subscribed " + r.name + ": POST to " + r.url + " signed with secret "), pre(r.secret, "secret"));
      await routesTable();
    } catch (e) { notice(e.message, "error"); }
  });
  const holder = el("div");
  const routesTable = async () => {
    const b = await api("/routes");
    holder.replaceChildren(el("table", { id: "routes" },
      el("tr", {}, ["Route", "Source", "Sender", "Events", "Deliver", "Prompt", "Last hour", ""].map((h) => el("th", {}, h))),
      b.routes.map((r) => el("tr", {},
        el("td", {}, r.name, r.enabled ? "" : " (disabled)"), el("td", {}, r.source), el("td", {}, r.sender || "detected"),
        el("td", {}, r.events.length ? r.events.join(", ") : "all"),
        el("td", {}, r.deliver + (r.deliver_only ? " (direct)" : "")),
        el("td", { class: "prompt" }, r.prompt || ""), el("td", {}, trafficChart(r.traffic)),
        el("td", {}, r.source === "subscription" ? el("button", { type: "button", class: "quiet", onclick: async () => {
          if (!(await confirmed("Remove the subscription " + r.name + "?"))) return;
          try { await api("/routes/" + encodeURIComponent(r.name), { method: "DELETE" }); await routesTable(); }
          catch (e) { notice(e.message, "error"); }
        } }, "Remove") : "")))));
  };
  PAGE.append(el("h1", {}, "Routes and subscriptions"), el("p", {}, "Senders POST to " + body.base + "/webhooks/<route>."), form, made, holder);
  await routesTable();
}

// ---- health ----------------------------------------------------------------------

function depthChart(samples) {
  const w = 600, h = 120;
  const chart = svg("svg", { width: w, height: h, viewBox: `0 0 ${w} ${h}`, class: "chart depth", role: "img" });
  if (samples.length < 1) return chart;
  const max = Math.max(1, ...samples.map((s) => s.queued + s.running + s.delivering));
  const now = Date.now();
  const x = (at) => w - ((now - at) / 3600000) * w;
  const y = (v) => h - (v / max) * (h - 4);
  const line = samples.map((s, i) => (i ? "L" : "M") + x(s.at_ms).toFixed(1) + " " + y(s.queued + s.running + s.delivering).toFixed(1)).join(" ");
  chart.append(svg("path", { d: line, class: "line" }));
  chart.append(Object.assign(svg("title"), { textContent: "inbox depth (queued, running, delivering), last hour; now " + (samples[samples.length - 1].queued) + " queued" }));
  return chart;
}

async function healthPage() {
  const h = await api("/health");
  const inbox = h.inbox || {};
  PAGE.append(el("h1", {}, "Health"),
    el("dl", { class: "facts", id: "inbox-counts" },
      ["queued", "running", "delivering", "delivered", "dead", "cancelled"].flatMap((s) => [el("dt", {}, s), el("dd", {}, inbox[s] || 0)]),
      el("dt", {}, "live runs"), el("dd", {}, h.live_runs)),
    el("h2", {}, "Inbox depth, last hour"), depthChart(h.depth),
    el("h2", {}, "Python plugins"),
    h.plugins ? el("p", {}, "Plugin host: " + (h.plugins.host_up ? "running" : "down"),
      el("ul", {}, h.plugins.plugins.map((p) => el("li", {}, p.name, p.error ? " — " + p.error : "")))) : el("p", {}, "No Python plugins."),
    el("h2", {}, "MCP servers"),
    h.mcp && h.mcp.length ? el("table", {}, el("tr", {}, ["Server", "Status", "Tools", "Error"].map((x) => el("th", {}, x))),
      h.mcp.map((s) => el("tr", {}, el("td", {}, s.name), el("td", {}, stateBadge(s.status)), el("td", {}, s.tools), el("td", {}, s.error || ""))))
      : el("p", {}, "No MCP servers."),
    el("h2", {}, "Chat bots"),
    h.bots && h.bots.length ? el("table", { id: "bots" }, el("tr", {}, ["Bot", "Receiving", "State", "Last update", "Updates", "Waiting sends", "Flood waits", "Poll restarts"].map((x) => el("th", {}, x))),
      h.bots.map((b) => el("tr", {}, el("td", {}, b.platform), el("td", {}, b.receiving),
        el("td", {}, stateBadge(b.connected ? "connected" : "down"), b.failure ? " " + b.failure : ""),
        el("td", {}, b.last_update_ms ? when(b.last_update_ms) : "none yet"), el("td", {}, b.received),
        el("td", {}, b.waiting_sends + (b.busiest_chats.length ? " (" + b.busiest_chats.map((c) => c.chat_id + ": " + c.waiting).join(", ") + ")" : "")),
        el("td", {}, b.flood_waits), el("td", {}, b.poll_restarts))))
      : el("p", {}, "No chat bots."));
}

// ---- start -----------------------------------------------------------------------

if (!SECRET) {
  toLogin();
} else {
  document.getElementById("logout").addEventListener("click", async () => {
    await fetch("/dashboard/logout", { method: "POST", headers: { "X-Dashboard-Secret": SECRET } });
    sessionStorage.removeItem(SECRET_KEY);
    location.href = "/dashboard/";
  });
  window.addEventListener("hashchange", route);
  route();
}
