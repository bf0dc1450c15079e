// The Documents view: files dropped (or chosen) become docling tasks (the docling door's POST
// /v1/convert/file/async, the task store and engine every docling client uses); each shows its pages' progress, then
// every page's image with the layout regions the engine found drawn on it, and the page's Markdown, DocTags, JSON
// and region list beside it. A click (or Enter) on a region selects its entry in the list, and back.

import { Unauthorized, api, download, el, errorText } from "./api.js";

// How often a converting task's progress is asked for: a page takes a second or more on a CPU.
const POLL_MS = 500;

const drop = document.getElementById("drop");
const picker = document.getElementById("doc-files");
const shelf = document.getElementById("documents");
const off = document.getElementById("documents-off");

export function enable(on) {
  off.hidden = on;
  drop.hidden = !on;
}

export function start() {}

drop.addEventListener("click", () => picker.click());
drop.addEventListener("keydown", (event) => {
  if (event.key === "Enter" || event.key === " ") {
    event.preventDefault();
    picker.click();
  }
});
picker.addEventListener("change", () => {
  convertAll([...picker.files]);
  picker.value = "";
});
for (const name of ["dragenter", "dragover"]) {
  drop.addEventListener(name, (event) => { event.preventDefault(); drop.classList.add("over"); });
}
drop.addEventListener("dragleave", () => drop.classList.remove("over"));
drop.addEventListener("drop", (event) => {
  event.preventDefault();
  drop.classList.remove("over");
  convertAll([...event.dataTransfer.files]);
});

function convertAll(files) {
  for (const file of files) convert(file);
}

async function convert(file) {
  const progress = el("progress", { max: 1, value: 0 });
  const line = el("span", { class: "progress-text" }, "uploading…");
  const card = el("article", { class: "document", "data-state": "uploading" },
    el("h2", {}, file.name), el("p", { role: "status" }, progress, " ", line));
  shelf.prepend(card);
  try {
    const form = new FormData();
    form.append("files", file, file.name);
    const submitted = await api("/v1/convert/file/async", { method: "POST", body: form });
    if (!submitted.ok) throw new Error(await errorText(submitted));
    const { task_id: id } = await submitted.json();
    card.dataset.task = id;
    let status;
    for (;;) {
      const response = await api(`/ui/api/documents/${encodeURIComponent(id)}`);
      if (!response.ok) throw new Error(await errorText(response));
      status = await response.json();
      card.dataset.state = status.status;
      if (status.total) {
        progress.max = status.total;
        progress.value = status.step;
        line.textContent = `page ${status.step} of ${status.total} converted` +
          (status.remaining_seconds ? `, about ${Math.ceil(status.remaining_seconds)} s left` : "");
      } else {
        line.textContent = status.stage ? status.stage.replaceAll("_", " ") : status.status;
      }
      if (!["queued", "processing"].includes(status.status)) break;
      await new Promise((resolve) => setTimeout(resolve, POLL_MS));
    }
    if (status.status !== "completed") throw new Error(status.error || status.status);
    line.textContent = `${status.pages.length} page${status.pages.length === 1 ? "" : "s"} converted`;
    progress.value = progress.max;
    card.append(downloads(id, status.name));
    if (status.warnings.length) {
      card.append(el("ul", { class: "warnings", "aria-label": "Warnings" },
        status.warnings.map((w) => el("li", {}, `Warning: ${w}`))));
    }
    for (const number of status.pages) card.append(await page(id, number));
    card.dataset.state = "shown";
  } catch (error) {
    card.dataset.state = "failed";
    line.textContent = `failed: ${error instanceof Unauthorized ? "the API key was refused" : error.message}`;
  }
}

function downloads(id, name) {
  const stem = name.replace(/\.[^.]+$/, "") || id;
  const base = `/ui/api/documents/${encodeURIComponent(id)}/download`;
  const button = (fmt, label) => el("button", { type: "button",
    onclick: () => download(`${base}/${fmt}`, `${stem}.${fmt}`).catch((e) => alert(e.message)) }, label);
  return el("p", { class: "downloads" }, "Download: ",
    button("md", "Markdown"), " ", button("json", "JSON"), " ", button("doctags", "DocTags"));
}

async function page(id, number) {
  const base = `/ui/api/documents/${encodeURIComponent(id)}/pages/${number}`;
  const response = await api(base);
  if (!response.ok) return el("p", {}, `page ${number}: ${await errorText(response)}`);
  const data = await response.json();
  const overlay = el("div", { class: "overlay" });
  const image = el("img", { alt: `page ${number}`, class: "page-image" });
  const figure = el("figure", { class: "page-figure" }, image, overlay);
  if (data.width && data.height) figure.style.aspectRatio = `${data.width} / ${data.height}`;
  api(`${base}/image`).then(async (r) => {
    if (r.ok) image.src = URL.createObjectURL(await r.blob());
    else image.alt = `page ${number}: no image (${await errorText(r)})`;
  }).catch(() => {});

  const entries = el("ol", { class: "region-list", "aria-label": `Regions of page ${number}` });
  const select = (index, from) => {
    for (const node of [...overlay.querySelectorAll(".selected"), ...entries.querySelectorAll(".selected")]) {
      node.classList.remove("selected");
    }
    const box = overlay.children[index];
    const item = entries.children[index];
    box.classList.add("selected");
    item.classList.add("selected");
    if (from === "box") { tabs.show("Regions"); item.scrollIntoView({ block: "nearest" }); } else box.focus();
  };
  data.regions.forEach((region, index) => {
    const [l, t, r, b] = region.box;
    const name = `${region.order ?? "–"} ${region.label}${region.furniture ? " (furniture)" : ""}`;
    const box = el("div", {
      class: `region label-${region.label}${region.furniture ? " furniture" : ""}`,
      role: "button", tabindex: 0, "aria-label": `region ${name}`, title: region.text,
      "data-label": region.label, "data-order": region.order ?? "",
      onclick: () => select(index, "box"),
      onkeydown: (event) => { if (event.key === "Enter") select(index, "box"); },
    }, el("span", { class: "tag" }, name));
    Object.assign(box.style, {
      left: `${l * 100}%`, top: `${t * 100}%`, width: `${(r - l) * 100}%`, height: `${(b - t) * 100}%`,
    });
    for (const [cl, ct, cr, cb] of region.cells || []) {
      const cell = el("div", { class: "cell" });
      Object.assign(cell.style, {
        left: `${((cl - l) / (r - l || 1)) * 100}%`, top: `${((ct - t) / (b - t || 1)) * 100}%`,
        width: `${((cr - cl) / (r - l || 1)) * 100}%`, height: `${((cb - ct) / (b - t || 1)) * 100}%`,
      });
      box.append(cell);
    }
    overlay.append(box);
    entries.append(el("li", { class: region.furniture ? "furniture" : "" },
      el("button", { type: "button", onclick: () => select(index, "list") }, name), " ",
      el("span", {}, region.text)));
  });

  const tabs = panes({
    Markdown: el("pre", { class: "markdown" }, data.markdown),
    DocTags: el("pre", { class: "doctags" }, data.doctags),
    JSON: el("pre", { class: "json" }, JSON.stringify(data.json, null, 1)),
    Regions: entries,
  });
  return el("section", { class: "page", "data-page": number, "data-regions": data.regions.length },
    el("h3", {}, `Page ${number} · ${data.regions.length} regions`),
    el("div", { class: "page-body" }, figure, tabs.node));
}

// A small tab strip of panes (Markdown first).
function panes(named) {
  const strip = el("div", { role: "tablist", class: "pane-tabs" });
  const node = el("div", { class: "panes" }, strip);
  const buttons = {};
  const wrappers = {};
  const show = (name) => {
    for (const other of Object.keys(named)) {
      wrappers[other].hidden = other !== name;
      buttons[other].setAttribute("aria-selected", String(other === name));
    }
  };
  for (const [name, pane] of Object.entries(named)) {
    buttons[name] = el("button", { type: "button", role: "tab", onclick: () => show(name) }, name);
    strip.append(buttons[name]);
    wrappers[name] = el("div", { class: "pane", role: "tabpanel", "data-pane": name }, pane);
    node.append(wrappers[name]);
  }
  show("Markdown");
  return { node, show };
}
