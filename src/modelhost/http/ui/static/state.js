// The State view: each model's state, slots, queue, memory, keep-alive and the last minutes' tokens/s (a small
// chart, its latest value also as text), and the jobs with their progress and a Cancel button.

import { api, bytes, el, errorText } from "./api.js";

const models = document.querySelector("#models tbody");
const jobs = document.querySelector("#jobs tbody");
const memory = document.getElementById("memory");

export function render(snapshot) {
  const m = snapshot.memory;
  memory.textContent = `Resident models: ${bytes(m.resident_bytes)}` +
    (m.budget_bytes ? ` of a ${bytes(m.budget_bytes)} budget` : " (no budget set)") +
    (m.process_rss_bytes ? ` · this process: ${bytes(m.process_rss_bytes)}` : "");
  models.replaceChildren(...snapshot.models.map(modelRow));
  const adapters = snapshot.adapters.map((a) => `${a.name} (on ${a.parent})`);
  if (adapters.length) {
    models.append(el("tr", {}, el("td", { colSpan: 8 }, `Adapters: ${adapters.join(", ")}`)));
  }
  // The table is drawn anew each second: a keyboard user's focus on a job's Cancel button moves to the new one.
  const focused = document.activeElement?.closest?.("#jobs tr[data-job]")?.dataset.job;
  jobs.replaceChildren(...(snapshot.jobs.length ? snapshot.jobs.map(jobRow)
    : [el("tr", {}, el("td", { colSpan: 6 }, "No jobs."))]));
  if (focused) jobs.querySelector(`tr[data-job="${CSS.escape(focused)}"] button`)?.focus();
}

function modelRow(model) {
  const busy = `${model.running} of ${model.slots}`;
  const keep = model.keep_alive_left_seconds === null ? "stays loaded" : `${Math.round(model.keep_alive_left_seconds)} s`;
  const f = model.finished;
  const latest = model.history.at(-1);
  return el("tr", { "data-model": model.name },
    el("th", { scope: "row" }, model.name, model.aliases.length ? el("small", {}, ` (${model.aliases.join(", ")})`) : null),
    el("td", { class: `state state-${model.state}` }, model.state, model.pinned ? " (pinned)" : ""),
    el("td", { class: "running" },
      el("meter", { min: 0, max: model.slots, value: model.running, "aria-label": `slots busy: ${busy}` }), ` ${busy}`),
    el("td", { class: "waiting" }, String(model.waiting)),
    el("td", {}, model.size_bytes ? bytes(model.size_bytes) : "–"),
    el("td", {}, keep),
    el("td", { class: "finished" }, `${f.stop} stop · ${f.length} length · ${f.cancelled} cancelled`),
    el("td", { class: "chart" }, chart(model.history),
      latest ? el("small", {}, ` ${latest.tokens_per_second.toFixed(1)} tok/s` +
        (latest.ttft_seconds === null ? "" : ` · TTFT ${latest.ttft_seconds.toFixed(2)} s`)) : null));
}

// tokens/s over the window as an SVG polyline; its values also in the title (a screen reader's and a mouse's).
function chart(history) {
  const width = 160;
  const height = 32;
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
  svg.setAttribute("width", width);
  svg.setAttribute("height", height);
  svg.setAttribute("role", "img");
  const peak = Math.max(1, ...history.map((p) => p.tokens_per_second));
  const label = history.length
    ? `tokens per second over the last ${history.length} intervals, peak ${peak.toFixed(1)}`
    : "no samples yet";
  svg.setAttribute("aria-label", label);
  const title = document.createElementNS(ns, "title");
  title.textContent = label;
  const line = document.createElementNS(ns, "polyline");
  const step = history.length > 1 ? width / (history.length - 1) : 0;
  line.setAttribute("points", history.map((p, i) =>
    `${(i * step).toFixed(1)},${(height - 2 - (p.tokens_per_second / peak) * (height - 4)).toFixed(1)}`).join(" "));
  line.setAttribute("fill", "none");
  line.setAttribute("stroke", "currentColor");
  line.setAttribute("stroke-width", "1.5");
  svg.append(title, line);
  return svg;
}

function jobRow(job) {
  const active = job.status === "queued" || job.status === "processing";
  const progress = job.total
    ? el("span", {}, el("progress", { max: job.total, value: job.step }), ` ${job.step} of ${job.total}`)
    : job.stage || "–";
  const cancel = active && !job.cancelling
    ? el("button", { type: "button", onclick: () => cancelJob(job) }, "Cancel")
    : job.cancelling ? "cancelling…" : "";
  return el("tr", { "data-job": job.id },
    el("th", { scope: "row" }, el("code", {}, job.id), el("small", {}, ` ${job.source}`)),
    el("td", {}, job.operation), el("td", {}, job.model),
    el("td", {}, job.status, job.error ? el("small", {}, `: ${job.error}`) : null),
    el("td", {}, progress, job.stage && job.total ? el("small", {}, ` (${job.stage})`) : null),
    el("td", {}, cancel));
}

async function cancelJob(job) {
  const response = await api(`/ui/api/jobs/${encodeURIComponent(job.source)}/${encodeURIComponent(job.id)}`,
    { method: "DELETE" });
  if (!response.ok) alert(`Cancel failed: ${await errorText(response)}`);
}
