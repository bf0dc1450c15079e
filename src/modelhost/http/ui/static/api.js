// How the page talks to the server: every call carries the API key (when the user gave one), a 401 asks for it,
// and server-sent events are read through fetch (EventSource cannot send an Authorization header).

const KEY = "modelhost.apiKey";

export class Unauthorized extends Error {}

export function apiKey() {
  return sessionStorage.getItem(KEY) || "";
}

export function setApiKey(key) {
  sessionStorage.setItem(KEY, key);
}

export function withKey(headers = {}) {
  const key = apiKey();
  return key ? { ...headers, Authorization: `Bearer ${key}` } : headers;
}

let onUnauthorized = () => {};

export function whenUnauthorized(handler) {
  onUnauthorized = handler;
}

// fetch with the key; a 401 opens the key prompt and throws Unauthorized.
export async function api(path, options = {}) {
  const response = await fetch(path, { ...options, headers: withKey(options.headers || {}) });
  if (response.status === 401) {
    onUnauthorized();
    throw new Unauthorized(`${path}: the API key is missing or wrong`);
  }
  return response;
}

// The message of an error answer in any of the server's shapes (OpenAI's, docling's, the page API's).
export async function errorText(response) {
  const text = await response.text();
  try {
    const body = JSON.parse(text);
    const detail = body.error?.message || body.detail || body.message || text;
    return typeof detail === "string" ? detail : JSON.stringify(detail);
  } catch {
    return text || `${response.status} ${response.statusText}`;
  }
}

// Server-sent events of a response body: yields {event, data} for each event, until the stream ends.
export async function* readEvents(response) {
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value.replaceAll("\r\n", "\n");
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let event = "message";
      const data = [];
      for (const line of block.split("\n")) {
        if (line.startsWith("event:")) event = line.slice(6).trim();
        else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
      }
      if (data.length) yield { event, data: data.join("\n") };
    }
  }
}

// Save bytes fetched with the key as a file (a plain link could not send the key).
export async function download(path, fallbackName) {
  const response = await api(path);
  if (!response.ok) throw new Error(await errorText(response));
  const disposition = response.headers.get("content-disposition") || "";
  const name = /filename="([^"]+)"/.exec(disposition)?.[1] || fallbackName;
  const url = URL.createObjectURL(await response.blob());
  const link = Object.assign(document.createElement("a"), { href: url, download: name });
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

export function el(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === undefined || value === null || value === false) continue;
    if (name === "class") node.className = value;
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else if (name in node && typeof value !== "string") node[name] = value;
    else node.setAttribute(name, value === true ? "" : value);
  }
  node.append(...children.flat().filter((c) => c !== null && c !== undefined));
  return node;
}

export function bytes(n) {
  if (n === null || n === undefined) return "–";
  const units = ["B", "KB", "MB", "GB", "TB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i += 1; }
  return `${n.toFixed(i ? 1 : 0)} ${units[i]}`;
}
