// The dashboard page: polls /api/poll for new metrics lines, keeps one row per step per run,
// and redraws the panels that /api/config names. Costs, restarts and eval points come computed
// from the server (mimojax/observe/run_costs.py); this script only merges rows and draws.
"use strict";

let CFG = null;
let target = null;
const runs = [];

const el = (tag, attrs = {}, text = "") => {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (text) e.textContent = text;
  return e;
};
const num = (v) => typeof v === "number" && isFinite(v);
const fmt = (v, d = 2) => (num(v) ? v.toFixed(d) : "–");
const usd = (v) => (num(v) ? "$" + (v < 1 ? v.toPrecision(3) : v.toFixed(2)) : "– (rates not set)");

async function init() {
  CFG = await (await fetch("/api/config")).json();
  target = CFG.target;
  const box = document.getElementById("target");
  if (target !== null) box.value = target;
  box.addEventListener("change", () => {
    target = box.value === "" ? null : parseFloat(box.value);
    for (const r of runs) r.summaryText = "";
    poll();
  });
  CFG.runs.forEach((name, i) => {
    runs.push({ name, gen: -1, lines: 0, byStep: new Map(), keys: new Set(), summary: null, summaryText: "" });
    document.getElementById("runs").appendChild(el("span", { id: `run-${i}`, "data-last-step": "" }, name));
  });
  const grid = document.getElementById("grid");
  for (const p of CFG.panels) {
    const sec = el("section", { class: "panel", id: `panel-${p.id}`, "data-state": "empty" });
    if (p.kind === "table") sec.classList.add("wide");
    sec.appendChild(el("h3", {}, p.title));
    sec.appendChild(el("div", { class: "plot" }));
    sec.appendChild(el("div", { class: "note" }));
    grid.appendChild(sec);
  }
  poll();
  setInterval(poll, CFG.interval_ms);
}

let busy = false;
async function poll() {
  if (busy) return;
  busy = true;
  try {
    const c = runs.map((r) => `${r.gen}:${r.lines}`).join(",");
    const q = `/api/poll?c=${c}` + (target === null || isNaN(target) ? "" : `&target=${target}`);
    const data = await (await fetch(q)).json();
    let changed = false;
    const errors = [];
    data.runs.forEach((d, i) => {
      const r = runs[i];
      if (d.generation !== r.gen || d.start !== r.lines) {
        r.gen = d.generation;
        r.lines = 0;
        r.byStep = new Map();
        r.keys = new Set();
        changed = true;
      }
      for (const line of d.lines) {
        r.byStep.set(line.step, Object.assign(r.byStep.get(line.step) || {}, line));
        for (const k of Object.keys(line)) r.keys.add(k);
      }
      r.lines += d.lines.length;
      changed = changed || d.lines.length > 0;
      const text = JSON.stringify(d.summary);
      if (text !== r.summaryText) {
        r.summaryText = text;
        r.summary = d.summary;
        changed = true;
      }
      if (d.error) errors.push(`${r.name}: ${d.error}`);
      const last = d.summary.last_step;
      const tag = document.getElementById(`run-${i}`);
      tag.dataset.lastStep = last === null ? "" : String(last);
      tag.textContent = `${r.name}: ` + (last === null ? "no steps yet" : `step ${last}`);
    });
    document.getElementById("error").textContent = errors.join("; ");
    document.getElementById("updated").textContent = "updated " + new Date().toLocaleTimeString();
    if (changed) render();
  } catch (e) {
    document.getElementById("error").textContent = "poll failed: " + e;
  } finally {
    busy = false;
  }
}

function rowsOf(r) {
  if (r.sortedAt !== r.lines || r.sortedGen !== r.gen) {
    r.sorted = Array.from(r.byStep.values()).sort((a, b) => a.step - b.step);
    r.sortedAt = r.lines;
    r.sortedGen = r.gen;
  }
  return r.sorted;
}

function matching(r, patterns) {
  const res = patterns.map((p) => new RegExp(p));
  return Array.from(r.keys).filter((k) => res.some((re) => re.test(k))).sort();
}

// At most ~MAX_POINTS per curve (every k-th step, and always the last): a long run stays quick
// to redraw; zooming shows the same thinned points, the JSONL keeps every step.
const MAX_POINTS = 1500;
function series(rows, key) {
  let x = [], y = [];
  for (const row of rows) if (num(row[key])) { x.push(row.step); y.push(row[key]); }
  if (x.length > MAX_POINTS) {
    const k = Math.ceil(x.length / MAX_POINTS);
    const keep = (_, i) => i % k === 0 || i === x.length - 1;
    x = x.filter(keep);
    y = y.filter(keep);
  }
  return { x, y };
}

// One color per run (so runs compare across panels), one dash or bar shade per metric.
const COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2"];
const DASHES = ["solid", "dash", "dot", "dashdot", "longdash", "longdashdot"];
const label = (r, text) => (runs.length > 1 ? `${r.name} · ${text}` : text);

// Cumulative billed seconds per step, as run_costs.billed_seconds: step time + eval time.
function cumulativeCost(r, rows) {
  const c = r.summary.costs;
  const x = [], y = [];
  let s = 0;
  for (const row of rows) {
    const step = num(row["timing_s/step"]) ? row["timing_s/step"] : row["perf/time_per_step"];
    s += num(step) ? step : 0;
    s += num(row["timing_s/eval"]) ? row["timing_s/eval"] : 0;
    x.push(row.step);
    y.push(c.priced ? (s * c.devices * c.device_per_hour + s * c.cpus * c.cpu_per_hour) / 3600 : (s * c.devices) / 3600);
  }
  return { x, y };
}

function tracesFor(p, missing) {
  const traces = [];
  const allPriced = runs.every((r) => r.summary && r.summary.costs && r.summary.costs.priced);
  runs.forEach((r, i) => {
    const rows = rowsOf(r);
    const s = r.summary || {};
    let mine = [];
    if (p.kind === "line" || p.kind === "stack") {
      matching(r, p.keys).forEach((key, k) => {
        const { x, y } = series(rows, key);
        const short = p.kind === "stack" ? key.replace("timing_s/", "") : key;
        const t = { x, y, name: label(r, short), legendgroup: r.name };
        if (p.kind === "stack" && runs.length === 1 && x.length <= 200) t.type = "bar";
        else if (p.kind === "stack" && runs.length === 1) {
          t.mode = "lines";
          t.stackgroup = "phases"; // stacked areas: thousands of bars draw slowly
        } else {
          t.mode = x.length > 60 ? "lines" : "lines+markers";
          t.line = { color: COLORS[i % COLORS.length], dash: DASHES[k % DASHES.length] };
          t.marker = { size: 4 };
        }
        if (key.endsWith("wall_s_lost")) t.yaxis = "y2"; // seconds beside counts
        mine.push(t);
      });
    } else if (p.kind === "compare_time" || p.kind === "compare_cost") {
      const ev = (s.evals || []).filter((e) => (p.kind === "compare_time" ? num(e.train_minutes) : true));
      if (ev.length) {
        const x = ev.map((e) => (p.kind === "compare_time" ? e.train_minutes : allPriced ? e.usd : e.device_hours));
        const color = COLORS[i % COLORS.length];
        mine.push({ x, y: ev.map((e) => 100 * e.acc), name: r.name, mode: "lines+markers", line: { color } });
      }
    } else if (p.kind === "cost" && s.costs && rows.length) {
      const { x, y } = cumulativeCost(r, rows);
      const name = label(r, s.costs.priced ? "$" : "device-hours");
      mine.push({ x, y, name, mode: "lines", line: { color: COLORS[i % COLORS.length] } });
    }
    if (!mine.length) missing.push(r.name);
    traces.push(...mine);
  });
  return traces;
}

function layoutFor(p) {
  const layout = {
    margin: { l: 50, r: 10, t: 10, b: 40 },
    legend: { font: { size: 10 } },
    uirevision: p.id,
    xaxis: { title: { text: "step" } },
  };
  if (p.kind === "stack") layout.barmode = "stack";
  if (p.id === "restarts") {
    layout.yaxis2 = { overlaying: "y", side: "right", title: { text: "seconds lost" } };
    layout.legend.x = 1.15;
  }
  if (p.kind === "compare_time") layout.xaxis.title.text = "training wall time (min)";
  if (p.kind === "compare_cost") {
    const priced = runs.every((r) => r.summary && r.summary.costs && r.summary.costs.priced);
    layout.xaxis.title.text = priced ? "cost ($)" : "device-hours (cost.*_per_hour not set)";
  }
  if (p.kind.startsWith("compare")) {
    layout.yaxis = { title: { text: "held-out accuracy (%)" } };
    if (num(target)) layout.shapes = [{ type: "line", xref: "paper", x0: 0, x1: 1, y0: 100 * target, y1: 100 * target, line: { dash: "dot", color: "#888" } }];
  }
  return layout;
}

function render() {
  for (const p of CFG.panels) {
    const sec = document.getElementById(`panel-${p.id}`);
    const plot = sec.querySelector(".plot");
    const note = sec.querySelector(".note");
    if (p.kind === "table") {
      renderTable(sec, plot, note);
      continue;
    }
    const missing = [];
    const traces = tracesFor(p, missing);
    if (!traces.length) {
      sec.dataset.state = "not-logged";
      note.className = "note notlogged";
      note.textContent = "not logged";
      Plotly.purge(plot);
      continue;
    }
    sec.dataset.state = "plot";
    note.className = "note notlogged";
    note.textContent = missing.length ? `not logged by: ${missing.join(", ")}` : "";
    Plotly.react(plot, traces, layoutFor(p), { displaylogo: false, responsive: true });
  }
}

function table(rows, header) {
  const t = el("table");
  if (header) {
    const tr = el("tr");
    for (const h of header) tr.appendChild(el("th", {}, h));
    t.appendChild(tr);
  }
  for (const row of rows) {
    const tr = el("tr");
    for (const c of row) tr.appendChild(el("td", {}, String(c)));
    t.appendChild(tr);
  }
  return t;
}

function runRows(r) {
  const s = r.summary;
  const h = s.headline || {};
  const c = s.costs || {};
  const rs = s.restarts || {};
  const pct = (v) => (num(v) ? (100 * v).toFixed(1) + "%" : "–");
  const tt = c.to_target;
  let toTarget = "set a target above";
  if (num(c.target)) {
    toTarget = tt
      ? `step ${tt.step}, ${fmt(tt.train_minutes, 1)} min training, ${fmt(tt.billed_s / 60, 1)} min billed, ${usd(tt.usd)}`
      : `not reached (${pct(c.target)})`;
  }
  return [
    ["steps (last step)", `${s.steps} (${s.last_step})`],
    ["held-out base → final (best)", `${pct(h.base_acc)} → ${pct(h.final_acc)} (${pct(h.best_acc)})`],
    ["training wall time", num(h.train_minutes) ? `${fmt(h.train_minutes, 1)} min` : "not logged"],
    ["throughput", num(h.mean_tokens_per_s) ? `${h.mean_tokens_per_s.toFixed(0)} tokens/s` : "not logged"],
    ["resources", `${c.devices} device(s)${c.devices_known ? "" : " (unknown: 1)"}, ${c.cpus} CPU(s)${c.cpus_known ? "" : " (unknown: 1)"}`],
    ["device-seconds / CPU-seconds", `${fmt(c.device_s_total, 0)} / ${fmt(c.cpu_s_total, 0)}`],
    ["$ per step / total", `${usd(c.usd_per_step)} / ${usd(c.usd_total)}`],
    ["to target", toTarget],
    ["restarts", `${rs.count} (${rs.source}); ${fmt(rs.steps_redone, 0)} steps redone, ${fmt(rs.wall_s_lost, 0)} s lost, ${usd(rs.usd_lost)}`],
  ];
}

function renderTable(sec, plot, note) {
  plot.replaceChildren();
  plot.style.height = "auto";
  const ready = runs.filter((r) => r.summary && r.summary.steps !== undefined && r.summary.costs);
  if (!ready.length) {
    sec.dataset.state = "not-logged";
    note.className = "note notlogged";
    note.textContent = "not logged";
    return;
  }
  sec.dataset.state = "plot";
  note.textContent = "";
  plot.style.display = "flex";
  plot.style.flexWrap = "wrap";
  plot.style.gap = "24px";
  for (const r of ready) {
    const col = el("div");
    plot.appendChild(col);
    col.appendChild(el("h3", {}, r.name));
    col.appendChild(table(runRows(r)));
    const c = r.summary.costs;
    const phases = Object.keys(c.phase_s);
    col.appendChild(table(phases.map((ph) => [ph, fmt(c.phase_s[ph], 1), fmt(c.device_s[ph], 1), fmt(c.cpu_s[ph], 1)]), ["phase", "seconds", "device-s", "CPU-s"]));
  }
}

init();
