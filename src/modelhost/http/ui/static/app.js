// The page's shell: the three views as tabs (arrow keys move between them, the URL's #hash remembers which), the
// API key prompt, and the live state stream that feeds the State view and the connection line.

import { Unauthorized, api, apiKey, readEvents, setApiKey, whenUnauthorized } from "./api.js";
import * as chat from "./chat.js";
import * as documents from "./documents.js";
import * as state from "./state.js";

const views = ["chat", "documents", "state"];
const connection = document.getElementById("connection");
const keyDialog = document.getElementById("key-dialog");
let stream = null; // the AbortController of the state stream

function show(name, focus = false) {
  if (!views.includes(name)) name = "chat";
  for (const view of views) {
    const tab = document.getElementById(`tab-${view}`);
    const selected = view === name;
    tab.setAttribute("aria-selected", String(selected));
    tab.tabIndex = selected ? 0 : -1;
    document.getElementById(`view-${view}`).hidden = !selected;
    if (selected && focus) tab.focus();
  }
  if (location.hash !== `#${name}`) history.replaceState(null, "", `#${name}`);
}

for (const view of views) {
  const tab = document.getElementById(`tab-${view}`);
  tab.addEventListener("click", () => show(view));
  tab.addEventListener("keydown", (event) => {
    const step = { ArrowRight: 1, ArrowLeft: -1 }[event.key];
    if (step) show(views[(views.indexOf(view) + step + views.length) % views.length], true);
  });
}
window.addEventListener("hashchange", () => show(location.hash.slice(1)));
show(location.hash.slice(1));

whenUnauthorized(() => {
  connection.textContent = "refused: the API key is missing or wrong";
  document.getElementById("key-message").textContent = apiKey()
    ? "The server refused that key. Enter its API key."
    : "This server needs its API key (serve --api-key).";
  if (!keyDialog.open) keyDialog.showModal();
});

document.getElementById("key-form").addEventListener("submit", () => {
  setApiKey(document.getElementById("key-input").value.trim());
  document.getElementById("key-input").value = "";
  start();
});

// The state stream: reconnects after a drop (a restarting server), stops for a missing key until one is given.
async function follow() {
  stream?.abort();
  const controller = new AbortController();
  stream = controller;
  while (!controller.signal.aborted) {
    try {
      const response = await api("/ui/api/events", { signal: controller.signal });
      if (!response.ok) throw new Error(`${response.status}`);
      for await (const { event, data } of readEvents(response)) {
        if (event !== "state") continue;
        const snapshot = JSON.parse(data);
        connection.textContent = describe(snapshot);
        state.render(snapshot);
        chat.models(snapshot);
        documents.enable(snapshot.documents);
      }
    } catch (error) {
      if (error instanceof Unauthorized || controller.signal.aborted) return;
      connection.textContent = "disconnected: retrying…";
    }
    await new Promise((resolve) => setTimeout(resolve, 2000));
  }
}

function describe(snapshot) {
  const loading = snapshot.models.filter((m) => m.state === "loading" || m.state === "new");
  const running = snapshot.models.reduce((sum, m) => sum + m.running, 0);
  const parts = [`connected: ${snapshot.models.length} model${snapshot.models.length === 1 ? "" : "s"}`];
  if (loading.length) parts.push(`loading ${loading.map((m) => m.name).join(", ")}`);
  parts.push(`${running} running`);
  return parts.join(" · ");
}

function start() {
  chat.start();
  documents.start();
  follow();
}

start();
