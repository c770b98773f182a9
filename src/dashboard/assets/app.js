// The edgeplane dashboard: polls /api/overview and /api/traffic and redraws its tables.
// Read-only; every value is inserted as text, never as markup.
"use strict";

const POLL_MS = 2000;
let overview = null;
let traffic = { routes: [], backends: [] };

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v !== undefined && v !== null && v !== "") e.setAttribute(k, v);
  }
  for (const c of children) {
    if (c === null || c === undefined) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

function condition(v) {
  return el("span", { class: v || "muted" }, v || "-");
}

function reasonCell(o) {
  const td = el("td", { class: "reason" }, o.reason || "");
  if (o.message && o.message !== o.reason) td.append(el("span", { class: "message" }, o.message));
  return td;
}

function nsName(o) {
  return o.namespace ? `${o.namespace}/${o.name}` : o.name;
}

function fill(section, rows) {
  const tbody = document.querySelector(`#${section} tbody`);
  tbody.replaceChildren(...rows);
  if (rows.length === 0) {
    const cols = document.querySelectorAll(`#${section} thead th`).length;
    tbody.append(el("tr", { class: "empty" }, el("td", { colspan: cols, class: "muted" }, "none")));
  }
}

function trafficFor(list, names) {
  return list.find((t) => names.includes(t.name));
}

// The four traffic cells of a row; `labelled` is false when the request series carry no such
// label at all (backends, before the proxy labels them), where 0 would be a guess.
function trafficCells(t, labelled = true) {
  const num = (v) => el("td", { class: "num" }, v);
  if (!t && !labelled) {
    const na = () => el("td", { class: "num muted", title: "the request metrics carry no backend label" }, "n/a");
    return [na(), na(), na(), na()];
  }
  if (!t) return [num("0"), num("-"), num("-"), num("-")];
  return [
    el("td", { class: "num requests" }, String(t.requests)),
    num(t.rate.toFixed(2)),
    num(t.errorRate === null || t.errorRate === undefined ? "-" : (100 * t.errorRate).toFixed(1) + "%"),
    num(t.p99Seconds === null || t.p99Seconds === undefined ? "-" : formatSeconds(t.p99Seconds)),
  ];
}

function formatSeconds(s) {
  return s < 1 ? (1000 * s).toFixed(s < 0.01 ? 2 : 0) + " ms" : s.toFixed(2) + " s";
}

function broken(o) {
  return [o.accepted, o.programmed, o.resolvedRefs].some((s) => s && s !== "True");
}

function drawGateways(o) {
  const rows = [];
  for (const g of o.gateways) {
    rows.push(el("tr", { class: broken(g) ? "gateway broken" : "gateway", "data-key": `Gateway/${nsName(g)}` },
      el("td", {}, el("strong", {}, nsName(g))),
      el("td", {}, condition(g.accepted)), el("td", {}, condition(g.programmed)),
      reasonCell(g), el("td", {}, g.addresses.join(", ")), el("td", {})));
    for (const l of g.listeners) {
      rows.push(el("tr", { class: broken(l) ? "listener broken" : "listener" },
        el("td", {}, l.name), el("td", {}, condition(l.accepted)), el("td", {}, condition(l.programmed)),
        reasonCell(l), el("td", {}, l.binds.join(", ")), el("td", { class: "num" }, l.attachedRoutes)));
    }
  }
  fill("gateways", rows);
}

function drawRoutes(o) {
  fill("routes", o.routes.map((r) => {
    const key = `${r.kind}/${nsName(r)}`;
    const parents = el("td", {});
    for (const a of r.attachments) {
      parents.append(el("div", {}, a.target, " ", condition(a.accepted)));
    }
    return el("tr", { class: broken(r) ? "route broken" : "route", "data-key": key },
      el("td", {}, r.kind), el("td", {}, nsName(r)),
      el("td", { class: "accepted" }, condition(r.accepted)),
      el("td", { class: "resolved" }, condition(r.resolvedRefs)),
      reasonCell(r), parents,
      ...trafficCells(trafficFor(traffic.routes, [key, nsName(r)])));
  }));
}

function drawBackends(o) {
  fill("backends", o.backends.map((b) => {
    const eps = el("td", {});
    for (const e of b.endpoints) eps.append(el("span", { class: `ep ${e.state}`, title: e.state }, `${e.address} ${e.state}`));
    if (b.endpoints.length === 0) eps.append(el("span", { class: "False" }, "no endpoints"));
    return el("tr", { class: b.endpoints.length ? "backend" : "backend broken", "data-key": b.service },
      el("td", {}, b.service, el("span", { class: "message" }, b.protocol)), eps,
      el("td", {}, [...b.routes].join(", ")),
      ...trafficCells(trafficFor(traffic.backends, [b.service]), traffic.backends.length > 0));
  }));
}

function drawCertificates(o) {
  const now = o.nowUnixMs / 1000;
  fill("certificates", o.certificates.map((c) => {
    let expires = el("span", { class: "muted" }, "unknown");
    if (c.notAfter !== null && c.notAfter !== undefined) {
      const days = Math.floor((c.notAfter - now) / 86400);
      const cls = days < 0 ? "expired" : days < 14 ? "soon" : "";
      const when = new Date(c.notAfter * 1000).toISOString().slice(0, 10);
      expires = el("span", { class: cls }, `${when} (${days < 0 ? "expired" : days + " days"})`);
    }
    return el("tr", {}, el("td", {}, c.secret), el("td", {}, c.dnsNames.join(", ")),
      el("td", {}, expires), el("td", {}, [...c.listeners].join(", ")));
  }));
}

function drawPolicies(o) {
  fill("policies", o.policies.map((p) => {
    const targets = el("td", {});
    for (const a of p.attachments) {
      targets.append(el("div", {}, a.target, " ", condition(a.accepted), a.reason && a.accepted !== "True" ? ` ${a.reason}` : ""));
    }
    return el("tr", { class: broken(p) ? "broken" : "" },
      el("td", {}, p.kind), el("td", {}, nsName(p)), el("td", {}, condition(p.accepted)),
      reasonCell(p), targets);
  }));
}

function drawOthers(o) {
  fill("others", o.others.map((x) => el("tr", { class: broken(x) ? "broken" : "" },
    el("td", {}, x.kind), el("td", {}, nsName(x)), el("td", {}, condition(x.accepted)),
    el("td", {}, condition(x.programmed)), reasonCell(x))));
}

function drawReconciles(o) {
  fill("reconciles", o.reconciles.slice().reverse().map((r) => el("tr", { class: r.error ? "broken" : "" },
    el("td", {}, new Date(r.atUnixMs).toLocaleTimeString()),
    el("td", { class: "num" }, formatSeconds(r.seconds)),
    el("td", { class: "num" }, r.generation), el("td", { class: "num" }, r.rules),
    el("td", { class: "num" }, r.problems), el("td", { class: "False" }, r.error || ""))));
}

function applyFilter() {
  const q = document.getElementById("search").value.trim().toLowerCase();
  for (const tr of document.querySelectorAll("main tbody tr")) {
    tr.hidden = q !== "" && !tr.textContent.toLowerCase().includes(q);
  }
}

function draw() {
  if (!overview) return;
  const state = document.getElementById("state");
  state.textContent = overview.ready ? "serving" : "not ready";
  document.getElementById("generation").textContent = `table generation ${overview.generation}`;
  drawGateways(overview);
  drawRoutes(overview);
  drawBackends(overview);
  drawCertificates(overview);
  drawPolicies(overview);
  drawOthers(overview);
  drawReconciles(overview);
  applyFilter();
}

async function getJson(path) {
  const r = await fetch(path, { cache: "no-store" });
  if (!r.ok) throw new Error(`${path}: ${r.status} ${await r.text()}`);
  return r.json();
}

async function refresh() {
  const error = document.getElementById("error");
  try {
    [overview, traffic] = await Promise.all([getJson("/api/overview"), getJson("/api/traffic")]);
    error.hidden = true;
    draw();
    document.getElementById("updated").textContent = `updated ${new Date().toLocaleTimeString()}`;
  } catch (e) {
    error.textContent = `cannot reach edgeplane: ${e.message}`;
    error.hidden = false;
  }
}

// The request tracer: waits (up to a minute) on /api/trace for the next request matching the
// form, then lists its way as edgeplane trace does.
function traceSteps(r) {
  const rows = [
    ["request", `${r.method} ${r.host}${r.path} ${r.protocol} from ${r.client} -> ${r.status}`],
    ["ids", `request ${r.requestId}, trace ${r.traceId}`],
    ["listener", `${r.listener} (${r.gateways.join(", ")})`],
  ];
  for (const c of r.considered) {
    const what = c.failed ? "tried" : "matched";
    const why = c.failed ? `: ${c.failed}` : "";
    rows.push([what, `${c.route} rule ${c.rule} (match ${c.matchIndex}) on host ${c.hostname}${why}`]);
  }
  if (r.route && !r.considered.some((c) => !c.failed)) rows.push(["route", `answered by ${r.route}`]);
  if (!r.route && !r.considered.some((c) => !c.failed)) rows.push(["route", "no rule matched"]);
  const set = (v) => v && !(typeof v === "object" && Object.keys(v).length === 0);
  if (set(r.filters)) rows.push(["filters", JSON.stringify(r.filters)]);
  if (set(r.listenerPolicy)) rows.push(["policy", JSON.stringify(r.listenerPolicy)]);
  for (const b of r.backends) {
    const ejected = b.ejectedEndpoints.length ? `, ejected ${b.ejectedEndpoints.join(" ")}` : "";
    const picked = b.picked ? `; picked ${b.picked}` : "";
    rows.push(["backend", `${b.backend} weight ${b.weight}: ${b.readyEndpoints} ready, ${b.terminatingEndpoints} terminating${ejected}${picked}`]);
  }
  r.attempts.forEach((a, i) => {
    const next = a.next ? `; ${a.next}` : "";
    rows.push([`attempt ${i + 1}`, `${a.endpoint} (${a.picked}): ${a.ended} in ${a.tookUs} us${next}`]);
  });
  if (r.endpoint) rows.push(["endpoint", r.endpoint]);
  if (r.error) rows.push(["error", r.error]);
  rows.push(["timings", `routing ${r.routingUs} us, upstream ${r.upstreamUs} us, total ${r.totalUs} us`]);
  return rows;
}

async function startTrace(event) {
  event.preventDefault();
  const state = document.getElementById("trace-state");
  const body = document.querySelector("#trace-steps tbody");
  const q = new URLSearchParams({ count: "1", wait: "60" });
  for (const [id, key] of [["trace-host", "host"], ["trace-path", "path"], ["trace-header", "header"]]) {
    const v = document.getElementById(id).value.trim();
    if (v) q.set(key, v);
  }
  document.getElementById("trace-start").disabled = true;
  state.textContent = "waiting for a matching request...";
  try {
    const r = await fetch(`/api/trace?${q}`, { cache: "no-store" });
    const text = await r.text();
    if (!r.ok) throw new Error(text.trim());
    const line = text.split("\n").find((l) => l.trim());
    if (!line) {
      state.textContent = "no matching request within a minute";
      return;
    }
    body.replaceChildren(...traceSteps(JSON.parse(line)).map(([k, v]) => el("tr", {}, el("td", {}, k), el("td", {}, v))));
    state.textContent = "traced";
  } catch (e) {
    state.textContent = `trace failed: ${e.message}`;
  } finally {
    document.getElementById("trace-start").disabled = false;
  }
}

document.getElementById("trace-form").addEventListener("submit", startTrace);
document.getElementById("search").addEventListener("input", applyFilter);
refresh();
setInterval(refresh, POLL_MS);
