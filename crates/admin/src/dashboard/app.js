// The cumulo dashboard: polls the admin API once a second and draws what it
// gets. No framework and no build step: this file is served as written.
// Every call carries the token (Authorization: Bearer), taken from the URL
// fragment (#token=...) or asked for when the core answers 401. With a
// read token (GET /v1/whoami) the page hides every button that changes
// something: the elements of class "operate".
"use strict";

const POLL_MS = 1000;
const NODES_EVERY = 3;             // polls between two node listings
const HISTORY = 600;               // chart points kept: 10 minutes at 1 s
const RATE_WINDOW_MS = 3000;       // rates and percentiles over the last 3 s
const LOG_KEEP = 2000;             // log lines kept in the page
const LEVELS = ["error", "warn", "info", "debug", "trace"];

const $ = (sel) => document.querySelector(sel);
const state = {
  token: "",
  role: null,                      // "read" or "operate", from /v1/whoami
  snapshots: [],                   // recent /v1/stats answers (for windows)
  points: [],                      // chart: {t, rate, p50, p99}
  services: [],                    // last /v1/services answer, with computed columns
  rows: new Map(),                 // service id -> <tr>
  subsOpen: new Set(),             // service ids whose subscriptions are shown
  sort: { key: "id", dir: 1 },
  logSeq: 0,
  logLines: [],
  polls: 0,
};

// ---- the admin API -------------------------------------------------------

async function api(method, path, body) {
  const headers = {};
  if (state.token) headers["Authorization"] = "Bearer " + state.token;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const r = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await r.text();
  let value = null;
  try { value = text ? JSON.parse(text) : null; } catch (_) { value = { message: text }; }
  if (r.status === 401) {
    $("#token-form").hidden = false;
    throw new Error("the core requires a token");
  }
  if (!r.ok) throw new Error((value && value.message) || r.status + " " + r.statusText);
  return value;
}

function notify(text, isError) {
  const d = document.createElement("div");
  d.textContent = text;
  if (isError) d.className = "error";
  $("#notice").appendChild(d);
  setTimeout(() => d.remove(), isError ? 8000 : 4000);
}

// ---- numbers -------------------------------------------------------------

/** The q-quantile (0..1) of histogram bucket counts, interpolated in its bucket (µs). */
function quantile(counts, bounds, q) {
  const total = counts.reduce((a, b) => a + b, 0);
  if (total === 0) return null;
  const rank = q * total;
  let seen = 0;
  for (let i = 0; i < counts.length; i++) {
    if (counts[i] > 0 && seen + counts[i] >= rank) {
      const lo = i === 0 ? 0 : bounds[i - 1];
      const hi = i < bounds.length ? bounds[i] : bounds[bounds.length - 1];
      return lo + (hi - lo) * ((rank - seen) / counts[i]);
    }
    seen += counts[i];
  }
  return bounds[bounds.length - 1];
}

const minus = (a, b) => a.map((x, i) => Math.max(0, x - ((b && b[i]) || 0)));
const fmtRate = (r) => (r == null ? "–" : r >= 100 ? r.toFixed(0) : r.toFixed(1));
const fmtUs = (us) => (us == null ? "–" : us >= 1e6 ? (us / 1e6).toFixed(2) + " s" : us >= 1000 ? (us / 1000).toFixed(2) + " ms" : us.toFixed(0) + " µs");
function fmtAge(s) {
  if (s < 120) return s.toFixed(0) + " s";
  if (s < 7200) return (s / 60).toFixed(0) + " min";
  if (s < 172800) return (s / 3600).toFixed(1) + " h";
  return (s / 86400).toFixed(1) + " d";
}

/** The snapshot at least RATE_WINDOW_MS older than the newest (or the oldest). */
function windowStart() {
  const s = state.snapshots;
  const now = s[s.length - 1];
  for (let i = s.length - 2; i >= 0; i--) if (now.time_ms - s[i].time_ms >= RATE_WINDOW_MS) return s[i];
  return s.length > 1 ? s[0] : null;
}

function addSnapshot(stats) {
  stats.byId = new Map(stats.services.map((s) => [s.id, s]));
  const prev = state.snapshots[state.snapshots.length - 1];
  state.snapshots.push(stats);
  while (state.snapshots.length > 2 && stats.time_ms - state.snapshots[1].time_ms > RATE_WINDOW_MS) state.snapshots.shift();
  if (!prev || stats.time_ms <= prev.time_ms) return;
  const dt = (stats.time_ms - prev.time_ms) / 1000;
  let buckets = null;
  for (const s of stats.services) {
    const d = minus(s.duration_buckets, prev.byId.get(s.id) && prev.byId.get(s.id).duration_buckets);
    buckets = buckets ? buckets.map((x, i) => x + d[i]) : d;
  }
  const bounds = stats.duration_bounds_us;
  state.points.push({
    t: stats.time_ms,
    rate: Math.max(0, stats.requests - prev.requests) / dt,
    p50: buckets && quantile(buckets, bounds, 0.5),
    p99: buckets && quantile(buckets, bounds, 0.99),
  });
  if (state.points.length > HISTORY) state.points.shift();
}

/** Per service: requests/s, errors, p50 and p99 over the window. */
function live(id) {
  const now = state.snapshots[state.snapshots.length - 1];
  const old = windowStart();
  const cur = now && now.byId.get(id);
  if (!cur) return {};
  const errors = cur.errors + cur.error_answers;
  const before = old && old.byId.get(id);
  if (!before) return { errors };
  const dt = (now.time_ms - old.time_ms) / 1000;
  const d = minus(cur.duration_buckets, before.duration_buckets);
  return {
    rate: Math.max(0, cur.received - before.received) / dt,
    errors,
    errorRate: Math.max(0, errors - before.errors - before.error_answers) / dt,
    p50: quantile(d, now.duration_bounds_us, 0.5),
    p99: quantile(d, now.duration_bounds_us, 0.99),
  };
}

// ---- services table ------------------------------------------------------

function cell(tr, cls, text, title) {
  const td = tr.querySelector("td." + cls);
  if (td.textContent !== text) td.textContent = text;
  if (title !== undefined && td.title !== title) td.title = title;
  return td;
}

function newRow(s) {
  const tr = document.createElement("tr");
  tr.dataset.serviceId = s.id;
  for (const cls of ["id", "prefix", "program", "status", "processes", "instances", "restarts", "rate num", "errors num", "p50 num", "p99 num", "actions"]) {
    const td = document.createElement("td");
    td.className = cls;
    tr.appendChild(td);
  }
  const procs = tr.querySelector("td.processes");
  procs.innerHTML = '<span class="count"></span> <input type="number" min="0" max="1024" class="scale-to operate" aria-label="processes"> <button class="scale operate">scale</button>';
  tr.querySelector("td.actions").innerHTML =
    '<button class="restart operate">restart</button><button class="subscriptions">subscriptions</button><button class="remove operate">remove</button>';
  procs.querySelector("button.scale").onclick = () => scale(s.id, tr);
  tr.querySelector("button.restart").onclick = () => act("POST", "/v1/services/" + s.id + "/restart", null, "restart of service " + s.id + " requested");
  tr.querySelector("button.remove").onclick = () => {
    if (confirm("Remove service " + s.id + " (" + s.prefix + ")? Its processes are stopped.")) act("DELETE", "/v1/services/" + s.id, undefined, "service " + s.id + " removed");
  };
  tr.querySelector("button.subscriptions").onclick = () => toggleSubscriptions(s.id);
  return tr;
}

/** Shows or hides what only an operate token may use. */
function applyRole(role) {
  state.role = role;
  const readOnly = role === "read";
  document.body.classList.toggle("read-only", readOnly);
  $("#role").hidden = !readOnly;
  $("#log-level").readOnly = readOnly;
}

async function act(method, path, body, done) {
  if (state.role === "read") return notify("this token may only read: " + method + " " + path + " needs the role operate", true);
  try {
    await api(method, path, body === null ? undefined : body);
    notify(done);
    poll();
  } catch (e) {
    notify(method + " " + path + ": " + e.message, true);
  }
}

function scale(id, tr) {
  const input = tr.querySelector("input.scale-to");
  const n = parseInt(input.value, 10);
  if (!(n >= 0)) return notify("give a number of processes", true);
  input.value = "";
  act("PATCH", "/v1/services/" + id, { count_process: n }, "service " + id + ": count_process " + n);
}

async function toggleSubscriptions(id) {
  if (state.subsOpen.has(id)) state.subsOpen.delete(id);
  else state.subsOpen.add(id);
  await showSubscriptions();
}

async function showSubscriptions() {
  document.querySelectorAll("tr.subs").forEach((r) => { if (!state.subsOpen.has(Number(r.dataset.for))) r.remove(); });
  if (state.subsOpen.size === 0) return;
  let all;
  try { all = (await api("GET", "/v1/subscriptions")).subscriptions; } catch (e) { return notify("subscriptions: " + e.message, true); }
  for (const id of state.subsOpen) {
    const tr = state.rows.get(id);
    if (!tr) continue;
    const mine = all.filter((p) => p.instances.some((i) => i.service_id === id))
      .map((p) => p.pattern + "  ×" + p.instances.filter((i) => i.service_id === id).length);
    let sub = tr.nextElementSibling;
    if (!sub || !sub.classList.contains("subs")) {
      sub = document.createElement("tr");
      sub.className = "subs";
      sub.dataset.for = id;
      sub.innerHTML = '<td colspan="12"></td>';
      tr.after(sub);
    }
    sub.firstChild.textContent = mine.length ? mine.join("\n") : "(no subscriptions)";
    sub.firstChild.style.whiteSpace = "pre";
  }
}

function sortValue(s, key) {
  const v = s[key];
  return v == null ? -1 : v;
}

function renderServices(list) {
  const filter = $("#service-filter").value.trim().toLowerCase();
  for (const s of list) {
    Object.assign(s, live(s.id));
    s.restarts_crashed = s.restarts;
  }
  const { key, dir } = state.sort;
  list.sort((a, b) => {
    const x = sortValue(a, key), y = sortValue(b, key);
    return (x < y ? -1 : x > y ? 1 : a.id - b.id) * dir;
  });
  const tbody = $("#services tbody");
  const seen = new Set();
  let previous = null;
  for (const s of list) {
    seen.add(s.id);
    let tr = state.rows.get(s.id);
    if (!tr) { tr = newRow(s); state.rows.set(s.id, tr); }
    cell(tr, "id", String(s.id));
    cell(tr, "prefix", s.prefix);
    cell(tr, "program", s.program, s.program);
    const st = cell(tr, "status", s.status);
    st.className = "status status-" + s.status;
    const count = tr.querySelector("td.processes .count");
    const procText = s.count_process + (s.count_thread > 1 ? " × " + s.count_thread : "");
    if (count.textContent !== procText) count.textContent = procText;
    cell(tr, "instances", String(s.instances) + (s.queued ? " (" + s.queued + " queued)" : ""));
    cell(tr, "restarts", String(s.process_restarts), s.restarts_crashed + " of them after the process exited on its own");
    cell(tr, "rate", fmtRate(s.rate));
    cell(tr, "errors", String(s.errors == null ? 0 : s.errors) + (s.errorRate ? " (" + fmtRate(s.errorRate) + "/s)" : ""));
    cell(tr, "p50", fmtUs(s.p50));
    cell(tr, "p99", fmtUs(s.p99));
    tr.hidden = filter !== "" && !(s.prefix.toLowerCase().includes(filter) || s.program.toLowerCase().includes(filter));
    // keep the order without moving rows that are already in place
    const wanted = previous ? previous.nextElementSibling : tbody.firstElementChild;
    if (wanted !== tr) {
      if (previous) previous.after(tr); else tbody.prepend(tr);
    }
    previous = tr;
    const sub = tr.nextElementSibling;
    if (sub && sub.classList.contains("subs")) {
      sub.hidden = tr.hidden;
      previous = sub;
    }
  }
  for (const [id, tr] of state.rows) {
    if (!seen.has(id)) {
      const sub = tr.nextElementSibling;
      if (sub && sub.classList.contains("subs")) sub.remove();
      tr.remove();
      state.rows.delete(id);
      state.subsOpen.delete(id);
    }
  }
  $("#service-count").textContent = "(" + list.length + ")";
}

// ---- nodes ---------------------------------------------------------------

function renderNodes(v) {
  const tbody = $("#nodes tbody");
  tbody.textContent = "";
  for (const n of v.nodes) {
    const tr = document.createElement("tr");
    tr.dataset.nodeId = n.id;
    const when = n.local ? "up " + fmtAge(n.uptime_seconds) : n.last_heartbeat_ms_ago + " ms ago";
    for (const text of [n.id, n.name || "(this node)", n.state, when, n.patterns == null ? "–" : n.patterns,
                        n.subscriptions == null ? "–" : n.subscriptions, n.requests_in_flight == null ? "–" : n.requests_in_flight]) {
      const td = document.createElement("td");
      td.textContent = String(text);
      tr.appendChild(td);
    }
    tbody.appendChild(tr);
  }
  const c = v.cluster;
  $("#cluster").textContent = c
    ? "cloud " + c.name + ", node " + c.node + ", NATS " + (c.connected ? "connected" : "disconnected") + " (" + c.servers.join(", ") + ")"
    : "single node (no [cluster] section)";
}

// ---- queues --------------------------------------------------------------

function fmtBytes(n) {
  if (n >= 1 << 30) return (n / (1 << 30)).toFixed(1) + " GiB";
  if (n >= 1 << 20) return (n / (1 << 20)).toFixed(1) + " MiB";
  if (n >= 1 << 10) return (n / (1 << 10)).toFixed(1) + " KiB";
  return n + " B";
}

function renderQueues(v) {
  $("#queues-section").hidden = v.queues.length === 0;
  const tbody = $("#queues tbody");
  tbody.textContent = "";
  for (const q of v.queues) {
    const tr = document.createElement("tr");
    tr.dataset.queue = q.prefix;
    const oldest = q.oldest_age_ms == null ? "–" : fmtAge(q.oldest_age_ms / 1000);
    const cells = [q.prefix, q.mode, q.sync, q.depth, q.in_flight, q.delivered, q.redelivered, q.dead_letters,
                   fmtBytes(q.bytes_on_disk), oldest];
    cells.forEach((text, i) => {
      const td = document.createElement("td");
      td.textContent = String(text);
      if (i >= 3) td.className = "num";   // the counts, right-aligned under their headings
      tr.appendChild(td);
    });
    const td = document.createElement("td");
    const path = (op) => "/v1/queues/" + op + "?queue=" + encodeURIComponent(q.prefix);
    for (const [op, label] of [["replay", "replay"], ["purge", "purge"]]) {
      const b = document.createElement("button");
      b.textContent = label;
      b.className = op + " operate";
      b.disabled = q.dead_letters === 0;
      b.onclick = () => act("POST", path(op), undefined, q.prefix + ": " + op + " of " + q.dead_letters + " dead letters");
      td.appendChild(b);
    }
    tr.appendChild(td);
    tbody.appendChild(tr);
  }
}

// ---- resiliency ----------------------------------------------------------

// Shown only when policies exist (GET /v1/resiliency): every breaker with
// its state (open ones stand out), the instances ejected now, and the
// retry counters.
function renderResiliency(v) {
  $("#resiliency-section").hidden = v.policies.length === 0;
  const s = v.stats;
  const policies = v.policies.length === 1 ? "1 policy" : v.policies.length + " policies";
  $("#resiliency-stats").textContent = policies + " · retries " + s.retries + " (recovered " + s.recovered +
    ", gave up " + s.gave_up + ") · refused " + s.refused + " · trips " + s.trips + " · ejections " + s.ejections;
  const tbody = $("#breakers tbody");
  tbody.textContent = "";
  for (const b of v.breakers) {
    const tr = document.createElement("tr");
    tr.dataset.policy = b.policy;
    tr.dataset.state = b.state;
    tr.className = "breaker-" + b.state;
    const state = b.state === "open" ? "open · probes in " + fmtAge(b.opens_in_ms / 1000) : b.state.replace("_", "-");
    const cells = [b.policy, b.pattern, state, b.consecutive_failures, b.failures, b.trips, b.refused, b.retries, b.shard];
    cells.forEach((text, i) => {
      const td = document.createElement("td");
      td.textContent = String(text);
      td.className = i === 2 ? "state" : i >= 3 ? "num" : "";
      tr.appendChild(td);
    });
    const td = document.createElement("td");
    if (b.state !== "closed") {
      const reset = document.createElement("button");
      reset.textContent = "reset";
      reset.className = "operate";
      const query = "?policy=" + encodeURIComponent(b.policy) + "&pattern=" + encodeURIComponent(b.pattern);
      reset.onclick = () => act("POST", "/v1/resiliency/breakers/reset" + query, undefined, "breaker of " + b.policy + " on " + b.pattern + " closed");
      td.appendChild(reset);
    }
    tr.appendChild(td);
    tbody.appendChild(tr);
  }
  $("#ejected").hidden = v.ejected.length === 0;
  const ejected = $("#ejected tbody");
  ejected.textContent = "";
  for (const e of v.ejected) {
    const tr = document.createElement("tr");
    [e.instance, e.label, fmtAge(e.back_in_ms / 1000), e.ejections, e.shard].forEach((text, i) => {
      const td = document.createElement("td");
      td.textContent = String(text);
      if (i >= 2) td.className = "num";
      tr.appendChild(td);
    });
    ejected.appendChild(tr);
  }
}

// ---- services built on the core -------------------------------------------

// A report's view is the service's own JSON (GET /v1/reports): its plain
// values on one line, then one line per object it holds (a cron job, a
// watched host, errors by kind), so a new kind of service shows without a
// change here. Queues have their own panel above.
function plainValues(o) {
  return Object.entries(o)
    .filter(([, v]) => v !== null && typeof v !== "object")
    .map(([k, v]) => k + " " + v)
    .join(" · ");
}

function reportLines(view) {
  const lines = [plainValues(view)];
  for (const [k, v] of Object.entries(view)) {
    if (Array.isArray(v)) {
      for (const item of v) {
        if (item && typeof item === "object") lines.push(k + ": " + plainValues(item));
      }
    } else if (v && typeof v === "object") {
      lines.push(k + ": " + plainValues(v));
    }
  }
  return lines.filter((l) => !/^[^:]*: ?$/.test(l) && l !== "");
}

// ---- tracing ---------------------------------------------------------------

// Shown only with [tracing] on: what the span exporter counted. Failed and
// dropped spans are what an operator looks for (a collector down or behind).
function renderTracing(t) {
  $("#tracing-section").hidden = !t;
  if (!t) return;
  $("#tracing-stats").textContent = "recorded " + t.recorded + " · exported " + t.exported + " · failed " + t.failed +
    " · dropped " + t.dropped + (t.failed || t.dropped ? " (the collector is down or behind)" : "");
}

function renderReports(v) {
  const shown = v.reports.filter((r) => r.kind !== "queue");
  $("#reports-section").hidden = shown.length === 0;
  const tbody = $("#reports tbody");
  tbody.textContent = "";
  for (const r of shown) {
    const tr = document.createElement("tr");
    tr.dataset.kind = r.kind;
    tr.dataset.id = r.id;
    for (const text of [r.kind, r.id, reportLines(r.view).join("\n")]) {
      const td = document.createElement("td");
      td.textContent = text;
      tr.appendChild(td);
    }
    tr.lastChild.className = "figures";
    tbody.appendChild(tr);
  }
}

// ---- log -----------------------------------------------------------------

function shownLevel(level) {
  return LEVELS.indexOf(level) <= LEVELS.indexOf($("#log-show").value);
}

function lineElement(l) {
  const d = document.createElement("div");
  d.className = "line lvl-" + l.level;
  d.dataset.level = l.level;
  const t = new Date(l.time_ms).toISOString().slice(11, 23);
  d.innerHTML = '<span class="t"></span> <span class="l"></span> <span class="m"></span>';
  d.children[0].textContent = t;
  d.children[1].textContent = l.level.toUpperCase().padEnd(5);
  d.children[2].textContent = l.target + ": " + l.message;
  return d;
}

function applyLogFilter(d) {
  const text = $("#log-text").value.toLowerCase();
  d.hidden = !shownLevel(d.dataset.level || "info") || (text !== "" && !d.textContent.toLowerCase().includes(text));
}

async function pollLog() {
  if ($("#log-pause").checked) return;
  const v = await api("GET", "/v1/logs?after=" + state.logSeq);
  const box = $("#log");
  const atBottom = box.scrollTop + box.clientHeight >= box.scrollHeight - 4;
  if (v.missed > 0 && state.logSeq > 0) {
    const gap = document.createElement("div");
    gap.className = "line gap";
    gap.textContent = "… " + v.missed + " lines not kept by the core";
    box.appendChild(gap);
  }
  for (const l of v.lines) {
    const d = lineElement(l);
    applyLogFilter(d);
    box.appendChild(d);
    state.logSeq = l.seq;
  }
  if (v.lines.length === 0) state.logSeq = Math.max(state.logSeq, v.last_seq);
  while (box.childElementCount > LOG_KEEP) box.firstElementChild.remove();
  if (atBottom) box.scrollTop = box.scrollHeight;
}

// ---- chart ---------------------------------------------------------------

function drawChart() {
  const canvas = $("#chart");
  const ratio = window.devicePixelRatio || 1;
  const w = canvas.clientWidth, h = canvas.clientHeight;
  if (canvas.width !== Math.round(w * ratio)) { canvas.width = Math.round(w * ratio); canvas.height = Math.round(h * ratio); }
  const g = canvas.getContext("2d");
  g.setTransform(ratio, 0, 0, ratio, 0, 0);
  g.clearRect(0, 0, w, h);
  const pts = state.points;
  const css = getComputedStyle(document.documentElement);
  const left = 56, right = 64, top = 10, bottom = 20;
  const pw = w - left - right, ph = h - top - bottom;
  const now = pts.length ? pts[pts.length - 1].t : Date.now();
  const span = HISTORY * POLL_MS;
  const x = (t) => left + pw * (1 - (now - t) / span);
  const maxRate = Math.max(1, ...pts.map((p) => p.rate));
  const maxUs = Math.max(1000, ...pts.map((p) => p.p99 || 0));
  g.font = "11px system-ui, sans-serif";
  g.strokeStyle = css.getPropertyValue("--line");
  g.fillStyle = css.getPropertyValue("--muted");
  g.lineWidth = 1;
  for (let i = 0; i <= 4; i++) {
    const y = top + ph * (i / 4);
    g.beginPath(); g.moveTo(left, y); g.lineTo(left + pw, y); g.stroke();
    g.textAlign = "right"; g.fillText(fmtRate(maxRate * (1 - i / 4)), left - 6, y + 4);
    g.textAlign = "left"; g.fillText(fmtUs(maxUs * (1 - i / 4)), left + pw + 6, y + 4);
  }
  g.textAlign = "center";
  for (let m = 0; m <= 10; m += 2) g.fillText(m === 0 ? "now" : "-" + m + " min", left + pw * (1 - m / 10), h - 5);
  const line = (key, max, color) => {
    g.strokeStyle = css.getPropertyValue(color);
    g.lineWidth = 1.5;
    g.beginPath();
    let drawing = false;
    for (const p of pts) {
      if (p[key] == null) { drawing = false; continue; }
      const px = x(p.t), py = top + ph * (1 - p[key] / max);
      if (drawing) g.lineTo(px, py); else g.moveTo(px, py);
      drawing = true;
    }
    g.stroke();
  };
  line("rate", maxRate, "--rate");
  line("p50", maxUs, "--p50");
  line("p99", maxUs, "--p99");
  const last = pts[pts.length - 1];
  $("#now-rate").textContent = last ? fmtRate(last.rate) : "–";
  $("#now-p50").textContent = last ? fmtUs(last.p50) : "–";
  $("#now-p99").textContent = last ? fmtUs(last.p99) : "–";
}

// ---- the loop ------------------------------------------------------------

async function poll() {
  try {
    const [whoami, status, stats, services] = await Promise.all(
      [api("GET", "/v1/whoami"), api("GET", "/v1/status"), api("GET", "/v1/stats"), api("GET", "/v1/services")]);
    applyRole(whoami.role);
    addSnapshot(stats);
    renderTracing(stats.tracing);
    state.services = services.services;
    renderServices(state.services);
    const t = status.totals;
    $("#node").textContent = "node " + status.node_id + " · v" + status.version + " · up " + fmtAge(status.uptime_seconds);
    $("#summary").textContent = status.services.total + " services · " + status.processes + " processes · " + status.instances +
      " instances · " + status.requests_in_flight + " in flight · " + t.timeouts + " timeouts · " + t.no_service + " no service" +
      (t.unauthorized || t.denied ? " · refused: " + t.unauthorized + " connections, " + t.denied + " sends" : "");
    const levelInput = $("#log-level");
    if (document.activeElement !== levelInput) levelInput.value = status.log_level;
    if (state.polls % NODES_EVERY === 0) renderNodes(await api("GET", "/v1/nodes"));
    renderQueues(await api("GET", "/v1/queues"));
    renderResiliency(await api("GET", "/v1/resiliency"));
    renderReports(await api("GET", "/v1/reports"));
    if (state.subsOpen.size) await showSubscriptions();
    await pollLog();
    drawChart();
    $("#live").textContent = "live " + new Date().toISOString().slice(11, 19);
    $("#live").className = "badge ok";
    $("#token-form").hidden = true;
  } catch (e) {
    $("#live").textContent = "not answering: " + e.message;
    $("#live").className = "badge bad";
  }
  state.polls++;
}

function start() {
  const m = /(?:^#|&)token=([^&]*)/.exec(location.hash);
  if (m) {
    state.token = decodeURIComponent(m[1]);
    sessionStorage.setItem("cumulo-token", state.token);
    history.replaceState(null, "", location.pathname);
  } else {
    state.token = sessionStorage.getItem("cumulo-token") || "";
  }
  $("#token-entry").onsubmit = (e) => {
    e.preventDefault();
    state.token = $("#token-input").value;
    sessionStorage.setItem("cumulo-token", state.token);
    poll();
  };
  $("#log-level-form").onsubmit = (e) => {
    e.preventDefault();
    const level = $("#log-level").value.trim();
    act("PUT", "/v1/log-level", { level }, "log level set to " + level);
    $("#log-level").blur();
  };
  $("#service-filter").oninput = () => renderServices(state.services);
  $("#reset-breakers").onclick = () => act("POST", "/v1/resiliency/breakers/reset", undefined, "every breaker closed");
  const refilter = () => document.querySelectorAll("#log .line").forEach(applyLogFilter);
  $("#log-show").onchange = refilter;
  $("#log-text").oninput = refilter;
  document.querySelectorAll("#services th[data-sort]").forEach((th) => {
    th.onclick = () => {
      const key = th.dataset.sort;
      state.sort = { key, dir: state.sort.key === key ? -state.sort.dir : 1 };
      document.querySelectorAll("#services th").forEach((x) => x.classList.remove("sorted", "up"));
      th.classList.add("sorted");
      if (state.sort.dir < 0) th.classList.add("up");
      renderServices(state.services);
    };
  });
  let busy = false;
  const tick = async () => {
    if (busy) return;       // a slow answer delays the next poll instead of piling them up
    busy = true;
    try { await poll(); } finally { busy = false; }
  };
  tick();
  setInterval(tick, POLL_MS);
  window.addEventListener("resize", drawChart);
}

document.addEventListener("DOMContentLoaded", start);
