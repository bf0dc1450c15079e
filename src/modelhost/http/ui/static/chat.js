// The Chat view: the OpenAI door's streamed /v1/chat/completions, as any client uses it. Stop aborts the fetch,
// which closes the connection: the server cancels the request there (its slot frees within a token).
// Conversations live in this browser's localStorage only, never on the server.

import { Unauthorized, api, el, errorText, readEvents } from "./api.js";

const STORE = "modelhost.conversations";
// Conversations kept: localStorage holds ~5 MB per site; the oldest beyond this are dropped.
const MAX_CONVERSATIONS = 50;
// Tries while the model loads (503 with Retry-After): a large model takes minutes to load on a CPU.
const MAX_LOADING_TRIES = 600;

const log = document.getElementById("chat-log");
const input = document.getElementById("chat-input");
const form = document.getElementById("chat-form");
const stopButton = document.getElementById("stop");
const sendButton = document.getElementById("send");
const status = document.getElementById("chat-status");
const modelSelect = document.getElementById("chat-model");
const imageInput = document.getElementById("chat-image");
const list = document.getElementById("conversations");

let conversations = load();
let current = conversations[0] || newConversation();
let controller = null; // the running answer's AbortController
let served = "";

function load() {
  try {
    const stored = JSON.parse(localStorage.getItem(STORE) || "[]");
    return Array.isArray(stored) ? stored : [];
  } catch {
    return [];
  }
}

function save() {
  conversations = [current, ...conversations.filter((c) => c.id !== current.id)].slice(0, MAX_CONVERSATIONS);
  // Images are not kept: a data URL is megabytes, and localStorage is small.
  const stored = conversations.map((c) => ({ ...c, messages: c.messages.map(({ image, ...m }) => m) }));
  try {
    localStorage.setItem(STORE, JSON.stringify(stored));
  } catch {
    status.textContent = "the browser's storage is full: this conversation is not saved";
  }
  renderList();
}

function newConversation() {
  return { id: crypto.randomUUID(), title: "New conversation", messages: [] };
}

function renderList() {
  list.replaceChildren(...conversations.map((c) => el("li", {},
    el("button", { type: "button", "aria-current": c.id === current.id ? "true" : null,
      onclick: () => { current = c; renderLog(); renderList(); } }, c.title))));
}

function renderLog() {
  log.replaceChildren(...current.messages.map(messageNode));
}

function messageNode(message) {
  const node = el("li", { class: `message ${message.role}`, "data-state": message.state || "done" },
    el("strong", { class: "role" }, message.role === "user" ? "You" : `Assistant${message.model ? ` (${message.model})` : ""}`));
  if (message.image) node.append(el("img", { class: "attached", src: message.image, alt: "attached image" }));
  if (message.reasoning) {
    node.append(el("details", { class: "thinking" }, el("summary", {}, "Thinking"), el("div", {}, message.reasoning)));
  }
  node.append(el("div", { class: "content" }, message.content));
  if (message.stats) node.append(el("p", { class: "stats" }, message.stats));
  return node;
}

export function models(snapshot) {
  const names = [...snapshot.models.map((m) => m.name), ...snapshot.adapters.map((a) => a.name)];
  const key = names.join("\n");
  if (key === served) return;
  served = key;
  const chosen = modelSelect.value || localStorage.getItem("modelhost.model") || snapshot.default;
  modelSelect.replaceChildren(...names.map((name) => el("option", { value: name }, name)));
  modelSelect.value = names.includes(chosen) ? chosen : snapshot.default;
}

modelSelect.addEventListener("change", () => localStorage.setItem("modelhost.model", modelSelect.value));

function apiMessages() {
  const system = document.getElementById("chat-system").value.trim();
  const turns = current.messages.filter((m) => m.role === "user" || (m.role === "assistant" && m.content));
  const out = turns.map((m) => ({
    role: m.role,
    content: m.image ? [{ type: "text", text: m.content }, { type: "image_url", image_url: { url: m.image } }] : m.content,
  }));
  return system ? [{ role: "system", content: system }, ...out] : out;
}

const sleep = (ms, signal) => new Promise((resolve, reject) => {
  const timer = setTimeout(resolve, ms);
  signal.addEventListener("abort", () => { clearTimeout(timer); reject(new DOMException("stopped", "AbortError")); });
});

async function send(text) {
  const image = imageInput.files[0] ? await dataUrl(imageInput.files[0]) : null;
  imageInput.value = "";
  current.messages.push({ role: "user", content: text, image });
  if (current.title === "New conversation") current.title = text.slice(0, 40);
  const answer = { role: "assistant", content: "", reasoning: "", model: modelSelect.value, state: "waiting" };
  current.messages.push(answer);
  renderLog();
  const node = log.lastElementChild;
  controller = new AbortController();
  const signal = controller.signal;
  stopButton.disabled = false;
  sendButton.disabled = true;
  const body = {
    model: modelSelect.value,
    messages: apiMessages(), // the empty answer is left out: it has no content yet
    stream: true,
    stream_options: { include_usage: true },
    temperature: Number(document.getElementById("chat-temperature").value),
    max_tokens: Number(document.getElementById("chat-max-tokens").value),
  };
  const sent = performance.now();
  let first = null;
  let chunks = 0;
  let usage = null;
  let finish = null;
  let live = node;
  const paint = () => {
    const fresh = messageNode(answer);
    live.replaceWith(fresh);
    live = fresh;
    log.scrollTop = log.scrollHeight;
  };
  try {
    let response;
    for (let tries = 0; ; tries += 1) {
      response = await api("/v1/chat/completions", {
        method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body), signal,
      });
      if (response.status !== 503 || tries >= MAX_LOADING_TRIES) break;
      const wait = Math.max(1, Number(response.headers.get("retry-after")) || 1);
      status.textContent = `${body.model} is loading (${await errorText(response)}): retrying in ${wait} s`;
      await sleep(wait * 1000, signal);
    }
    if (!response.ok) throw new Error(await errorText(response));
    status.textContent = "answering…";
    answer.state = "streaming";
    paint();
    for await (const { data } of readEvents(response)) {
      if (data === "[DONE]") break;
      const chunk = JSON.parse(data);
      if (chunk.usage) usage = chunk.usage;
      const choice = chunk.choices?.[0];
      const delta = choice?.delta || {};
      const thought = delta.reasoning_content || delta.reasoning || "";
      if (delta.content || thought) {
        first ??= performance.now();
        chunks += 1;
        answer.content += delta.content || "";
        answer.reasoning += thought;
        paint();
      }
      if (choice?.finish_reason) finish = choice.finish_reason;
    }
    answer.state = "done";
  } catch (error) {
    if (error.name === "AbortError") {
      answer.state = "stopped";
    } else {
      answer.state = "failed";
      answer.content += `${answer.content ? "\n\n" : ""}[error: ${error instanceof Unauthorized ? "the API key was refused" : error.message}]`;
    }
  } finally {
    const end = performance.now();
    const tokens = usage?.completion_tokens ?? chunks;
    const parts = [];
    if (first !== null) {
      parts.push(`TTFT ${((first - sent) / 1000).toFixed(2)} s`);
      if (end > first && tokens > 1) parts.push(`${((tokens - 1) / ((end - first) / 1000)).toFixed(1)} tokens/s`);
      parts.push(`${tokens} tokens`);
    }
    if (answer.state === "stopped") parts.push("stopped");
    else if (finish) parts.push(`finish: ${finish}`);
    answer.stats = parts.join(" · ");
    paint();
    controller = null;
    stopButton.disabled = true;
    sendButton.disabled = false;
    status.textContent = "";
    save();
  }
}

function dataUrl(file) {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(reader.result);
    reader.onerror = () => reject(reader.error);
    reader.readAsDataURL(file);
  });
}

function stop() {
  controller?.abort();
}

form.addEventListener("submit", (event) => {
  event.preventDefault();
  const text = input.value.trim();
  if (!text || controller) return;
  input.value = "";
  send(text);
});
input.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey) {
    event.preventDefault();
    form.requestSubmit();
  }
});
document.addEventListener("keydown", (event) => {
  if (event.key === "Escape" && controller) stop();
});
stopButton.addEventListener("click", stop);
document.getElementById("new-chat").addEventListener("click", () => {
  current = newConversation();
  renderLog();
  renderList();
  input.focus();
});

export function start() {
  renderList();
  renderLog();
}
