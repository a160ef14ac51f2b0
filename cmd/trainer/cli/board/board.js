// The trainer board: polls /api/runs and /api/status every 2 s and
// /api/metrics every 1 s, and draws each numeric metric of metrics.jsonl
// against step with uPlot (one chart per metric, one series per run).
// Every run's list entry carries data-points: how many metric lines it has
// plotted so far. The server's warnings (no run found, a bound of its walk
// reached) show above the runs. The smoothing slider applies TensorBoard's
// debiased exponential moving average to every curve, the raw curve drawn
// faintly behind it.
"use strict";

const COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
  "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"];
const NOT_CHARTED = new Set(["step", "wall_sec"]);

const state = {
  runs: [],        // from /api/runs
  metrics: {},     // run index -> array of metric line objects
  charts: {},      // metric -> uPlot
  layout: "",      // runs and metrics the charts were built for
  runsKey: "", configsKey: "", evalKey: "", imagesKey: "", warningsKey: "",
  smoothing: 0,    // 0 … 0.99, the weight of the past in the moving average
};

function color(i) { return COLORS[i % COLORS.length]; }

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v; else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c instanceof Node ? c : String(c));
  return e;
}

function fmt(v) {
  if (typeof v !== "number") return v == null ? "" : String(v);
  if (Number.isInteger(v)) return String(v);
  return Math.abs(v) >= 1e5 || Math.abs(v) < 1e-3 ? v.toExponential(3) : v.toPrecision(4);
}

// tick labels an axis value with at most 4 significant digits.
function tick(v) { return v == null ? "" : String(Number(v.toPrecision(4))); }

function setStatus(text) { document.getElementById("status").textContent = text; }

async function getJSON(url) {
  const res = await fetch(url, { cache: "no-store" });
  if (!res.ok) throw new Error(url + ": " + res.status);
  return res.json();
}

// plotted counts the lines of a run that are points: a numeric step and
// at least one charted numeric field.
function plotted(lines) {
  let n = 0;
  for (const m of lines) {
    if (typeof m.step !== "number") continue;
    if (Object.keys(m).some(k => !NOT_CHARTED.has(k) && typeof m[k] === "number")) n++;
  }
  return n;
}

function renderWarnings(warnings) {
  const key = JSON.stringify(warnings);
  if (key === state.warningsKey) return;
  state.warningsKey = key;
  document.getElementById("warnings").replaceChildren(
    ...warnings.map(w => el("p", { class: "warning", role: "alert" }, "⚠ " + w)));
}

// smooth is TensorBoard's smoothing of a series (nulls are gaps, kept):
// an exponential moving average with weight w on the past, debiased so
// that the first points are not pulled towards zero.
function smooth(ys, w) {
  if (!(w > 0)) return ys;
  let last = 0, n = 0;
  return ys.map(y => {
    if (y == null || !Number.isFinite(y)) return y;
    n++;
    last = last * w + (1 - w) * y;
    return last / (1 - Math.pow(w, n));
  });
}

function renderRuns() {
  document.getElementById("no-runs").hidden = state.runs.length > 0;
  const ul = document.getElementById("runs");
  const key = JSON.stringify(state.runs.map(r => [r.name, r.dir]));
  if (key !== state.runsKey) {
    state.runsKey = key;
    ul.replaceChildren(...state.runs.map(r => el("li", { "data-run": r.index, "data-points": "0" },
      el("span", { class: "swatch", style: "background:" + color(r.index) }),
      el("b", {}, r.name), el("span", { class: "dir" }, r.dir), el("span", { class: "count" }, ""))));
  }
  for (const r of state.runs) {
    const li = ul.querySelector(`li[data-run="${r.index}"]`);
    const n = plotted(state.metrics[r.index] || []);
    li.setAttribute("data-points", String(n));
    li.querySelector(".count").textContent = `${n} points` + (r.skipped ? `, ${r.skipped} bad lines` : "");
  }
}

function renderConfigs() {
  const key = JSON.stringify(state.runs.map(r => [r.name, r.config]));
  if (key === state.configsKey) return;
  state.configsKey = key;
  // A line is highlighted when some other run's config lacks it.
  const sets = state.runs.map(r => new Set(r.config.split("\n")));
  document.getElementById("configs").replaceChildren(...state.runs.map((r, i) => {
    const lines = r.config ? r.config.replace(/\n$/, "").split("\n") : ["(no config.yaml)"];
    const pre = el("pre", {}, ...lines.map(l =>
      el("span", { class: sets.some((s, j) => j !== i && !s.has(l)) ? "diff" : "" }, l || " ")));
    return el("div", {}, el("h3", {}, r.name), pre);
  }));
}

function renderEval() {
  const key = JSON.stringify(state.runs.map(r => r.eval));
  if (key === state.evalKey) return;
  state.evalKey = key;
  const box = document.getElementById("eval");
  const withEval = state.runs.filter(r => r.eval);
  if (!withEval.length) { box.replaceChildren(el("p", { class: "empty" }, "no evaluation yet")); return; }
  const cols = new Set();
  for (const r of withEval) for (const k of Object.keys(r.eval)) cols.add(k);
  const order = k => k === "step" ? 0 : k === "wall_sec" ? 2 : 1;
  const keys = [...cols].sort((a, b) => order(a) - order(b) || a.localeCompare(b));
  box.replaceChildren(el("table", { id: "eval-table" },
    el("thead", {}, el("tr", {}, el("th", {}, "run"), ...keys.map(k => el("th", {}, k)))),
    el("tbody", {}, ...withEval.map(r => el("tr", { "data-run": r.index },
      el("td", {}, r.name), ...keys.map(k => el("td", {}, fmt(r.eval[k]))))))));
}

function renderImages() {
  const key = JSON.stringify(state.runs.map(r => r.images));
  if (key === state.imagesKey) return;
  state.imagesKey = key;
  const box = document.getElementById("images");
  const withImages = state.runs.filter(r => r.images.length);
  if (!withImages.length) { box.replaceChildren(el("p", { class: "empty" }, "no PNGs")); return; }
  box.replaceChildren(...withImages.map(r => el("div", {}, el("h3", {}, r.name),
    el("div", { class: "imgs" }, ...r.images.map(im => {
      const src = `/api/image?run=${r.index}&name=${encodeURIComponent(im.name)}&v=${im.mtime}`;
      return el("figure", {}, el("a", { href: src, target: "_blank" }, el("img", { src, alt: im.name, loading: "lazy" })),
        el("figcaption", {}, im.name));
    })))));
}

function chartWidth() {
  const w = document.getElementById("charts").clientWidth || 800;
  return Math.max(280, Math.floor((w - 12) / 2) - 10);
}

// logScale reports whether a metric's chart has a log y axis: when every
// value is positive and it is a loss, or an evaluation (valid_, test_)
// whose values span more than two decades.
function logScale(metric, lo, hi) {
  if (!(lo > 0)) return false;
  if (metric.includes("loss")) return true;
  return (metric.startsWith("valid_") || metric.startsWith("test_")) && hi / lo > 100;
}

// metricRank orders the charts: the loss first, then evaluations, then
// the other training fields (per-layer terms), then the rest (lr, …).
function metricRank(k) {
  if (k === "train_loss" || k === "loss") return 0;
  if (k.startsWith("valid_")) return 1;
  if (k.startsWith("train_")) return 2;
  return 3;
}

function drawCharts() {
  const runs = state.runs;
  const metricSet = new Set();
  for (const r of runs) for (const m of state.metrics[r.index] || [])
    for (const k of Object.keys(m)) if (!NOT_CHARTED.has(k) && typeof m[k] === "number") metricSet.add(k);
  const metrics = [...metricSet].sort((a, b) => metricRank(a) - metricRank(b) || a.localeCompare(b));
  // Per metric: the runs that logged it, each step's value, and whether a
  // log scale fits (logScale). With smoothing, each run is two series:
  // its raw values, faint, and their moving average.
  const w = state.smoothing;
  const plans = metrics.map(metric => {
    const steps = new Set();
    const byRun = [];
    let lo = Infinity, hi = -Infinity;
    for (const r of runs) {
      const m = new Map();
      for (const line of state.metrics[r.index] || []) {
        const v = line[metric];
        if (typeof line.step !== "number" || typeof v !== "number") continue;
        m.set(line.step, v); steps.add(line.step);
        lo = Math.min(lo, v); hi = Math.max(hi, v);
      }
      if (m.size) byRun.push([r, m]);
    }
    const xs = [...steps].sort((a, b) => a - b);
    const data = [xs];
    for (const [, m] of byRun) {
      const ys = xs.map(x => m.has(x) ? m.get(x) : null);
      if (w > 0) data.push(ys);
      data.push(smooth(ys, w));
    }
    const log = logScale(metric, lo, hi);
    return { metric, runs: byRun.map(([r]) => r), data, log };
  });
  const box = document.getElementById("charts");
  const layout = JSON.stringify([w > 0, plans.map(p => [p.metric, p.log, p.runs.map(r => r.index)])]);
  if (layout !== state.layout) {
    for (const c of Object.values(state.charts)) c.destroy();
    state.charts = {};
    state.layout = layout;
    box.replaceChildren();
    if (!plans.length) box.append(el("p", { class: "empty" }, "no metrics yet"));
  }
  for (const p of plans) {
    const chart = state.charts[p.metric];
    if (chart) { chart.setData(p.data); continue; }
    const div = el("div", { class: "chart", "data-metric": p.metric });
    box.append(div);
    state.charts[p.metric] = new uPlot({
      title: p.metric + (p.log ? " (log scale)" : ""), width: chartWidth(), height: 240,
      scales: { x: { time: false }, y: p.log ? { distr: 3 } : {} },
      series: [{ label: "step" }, ...p.runs.flatMap(r => {
        const line = {
          label: r.name, stroke: color(r.index), width: 1.5, spanGaps: true,
          points: { show: w === 0 && p.data[0].length < 60 },
        };
        if (w === 0) return [line];
        return [{ label: r.name + " (raw)", stroke: color(r.index) + "40", width: 1, spanGaps: true, points: { show: false } }, line];
      })],
      axes: [{ label: "step" }, { size: 60, values: (u, vals) => vals.map(tick) }],
    }, p.data, div);
  }
}

async function pollRuns() {
  try {
    const [runs, status] = await Promise.all([getJSON("/api/runs"), getJSON("/api/status")]);
    state.runs = runs;
    renderWarnings(status.warnings);
    renderRuns(); renderConfigs(); renderEval(); renderImages();
  } catch (e) { setStatus("error: " + e.message); }
}

async function pollMetrics() {
  try {
    await Promise.all(state.runs.map(async r => {
      const have = state.metrics[r.index] || [];
      const gen = have.gen === undefined ? "" : `&gen=${have.gen}`;
      const res = await getJSON(`/api/metrics?run=${r.index}&since=${have.length}${gen}`);
      if (res.since < have.length) have.length = res.since; // file rewritten or replaced
      have.gen = res.gen;
      for (const line of res.lines) have.push(line);
      state.metrics[r.index] = have;
    }));
    drawCharts();
    renderRuns();
    setStatus("updated " + new Date().toLocaleTimeString());
    document.body.setAttribute("data-ready", "1");
  } catch (e) { setStatus("error: " + e.message); }
}

function loop(fn, ms) { fn().finally(() => setTimeout(() => loop(fn, ms), ms)); }

// setSmoothing sets the slider's weight, keeps it for the next visit, and
// redraws.
function setSmoothing(v) {
  const w = Math.min(0.99, Math.max(0, Number(v) || 0));
  state.smoothing = w;
  document.getElementById("smoothing").value = String(w);
  document.getElementById("smoothing-value").textContent = w.toFixed(2);
  try { localStorage.setItem("board.smoothing", String(w)); } catch (e) { /* storage off */ }
  drawCharts();
}

// The smoothing starts as ?smoothing= says, else as it was last time.
document.getElementById("smoothing").addEventListener("input", e => setSmoothing(e.target.value));
{
  let initial = new URLSearchParams(location.search).get("smoothing");
  if (initial == null) try { initial = localStorage.getItem("board.smoothing"); } catch (e) { /* storage off */ }
  setSmoothing(initial);
}

window.addEventListener("resize", () => {
  for (const c of Object.values(state.charts)) c.setSize({ width: chartWidth(), height: 240 });
});

pollRuns().then(() => { loop(pollMetrics, 1000); setTimeout(() => loop(pollRuns, 2000), 2000); });
