// The console's only way to the server: the public HTTP API, with the
// bearer token the user gives when the server asks for one (401).

import { h } from "./dom";

const KEY = "hourglass.token";

let token: string | null = sessionStorage.getItem(KEY) ?? localStorage.getItem(KEY);

/** APIError is an error reply of the API: {"error": {code, codeName, message}}. */
export class APIError extends Error {
  constructor(public status: number, public code: number, public codeName: string, message: string) {
    super(message);
    this.name = "APIError";
  }
}

export function hasToken(): boolean {
  return token !== null;
}

/** forgetToken drops the stored token; the next call asks again if the server needs one. */
export function forgetToken(): void {
  token = null;
  sessionStorage.removeItem(KEY);
  localStorage.removeItem(KEY);
  onTokenChange();
}

export let onTokenChange: () => void = () => {};
export function setTokenListener(f: () => void): void {
  onTokenChange = f;
}

async function toError(r: Response): Promise<APIError> {
  const text = await r.text();
  try {
    const e = JSON.parse(text).error;
    if (e && typeof e.message === "string") return new APIError(r.status, e.code ?? 0, e.codeName ?? "", e.message);
  } catch {
    // not JSON: fall through
  }
  return new APIError(r.status, 0, "", text.trim() || `${r.status} ${r.statusText}`);
}

export interface CallOptions {
  body?: unknown;
  accept?: string;
  signal?: AbortSignal;
}

/** call sends one request; a 401 asks for the token and sends it again. */
export async function call(method: string, path: string, opts: CallOptions = {}): Promise<Response> {
  for (;;) {
    const headers: Record<string, string> = {};
    if (token !== null) headers.Authorization = `Bearer ${token}`;
    if (opts.body !== undefined) headers["Content-Type"] = "application/json";
    if (opts.accept) headers.Accept = opts.accept;
    const r = await fetch(path, {
      method, headers, signal: opts.signal, cache: "no-store",
      body: opts.body === undefined ? undefined : JSON.stringify(opts.body),
    });
    if (r.status === 401) {
      await askToken(token !== null);
      continue;
    }
    if (!r.ok) throw await toError(r);
    return r;
  }
}

export async function getJSON<T>(path: string, signal?: AbortSignal): Promise<T> {
  return (await call("GET", path, { signal })).json() as Promise<T>;
}

export async function send<T>(method: string, path: string, body: unknown, signal?: AbortSignal): Promise<T> {
  return (await call(method, path, { body, signal })).json() as Promise<T>;
}

export function collPath(name: string, rest = ""): string {
  const p = `/v1/collections/${encodeURIComponent(name)}${rest}`;
  // On a replica set, the console reads from the member that serves it,
  // a secondary too (docs/api.md, replica sets).
  return rest === "/find" || rest === "/aggregate" ? `${p}?readPreference=primaryPreferred` : p;
}

let asking: Promise<void> | null = null;

/**
 * askToken shows the token dialog once, however many requests are waiting
 * for it, and resolves when the server accepts the token given.
 */
function askToken(refused: boolean): Promise<void> {
  if (!asking) {
    asking = tokenDialog(refused).finally(() => { asking = null; });
  }
  return asking;
}

function tokenDialog(refused: boolean): Promise<void> {
  return new Promise((resolve) => {
    const input = h("input", {
      id: "token-input", type: "password", autocomplete: "current-password", required: true,
      spellcheck: "false", "aria-describedby": "token-help token-error",
    });
    const remember = h("input", { id: "token-remember", type: "checkbox" });
    const err = h("p", { id: "token-error", class: "field-error", role: "alert" }, refused ? "The server refused the stored token. Enter it again." : "");
    const submit = h("button", { type: "submit", class: "primary" }, "Sign in");
    const form = h("form", { method: "dialog", class: "stack" },
      h("h2", null, "This server needs a token"),
      h("p", { id: "token-help" }, "Enter the server's auth token (", h("code", null, "--auth-token"),
        "). The console sends it as a bearer token with every API call; it is kept in this tab only unless you tick the box."),
      h("label", { for: "token-input" }, "Auth token"),
      input, err,
      h("label", { class: "check" }, remember, " Remember on this device"),
      h("div", { class: "actions" }, submit));
    const dialog = h("dialog", { class: "token-dialog", "aria-labelledby": "token-title" }, form);
    form.querySelector("h2")!.id = "token-title";
    // The dialog cannot be dismissed: nothing works without the token.
    dialog.addEventListener("cancel", (e) => e.preventDefault());
    form.addEventListener("submit", async (e) => {
      e.preventDefault();
      const t = input.value.trim();
      if (!t) return;
      submit.disabled = true;
      err.textContent = "";
      try {
        const r = await fetch("/v1/status", { headers: { Authorization: `Bearer ${t}` }, cache: "no-store" });
        if (r.status === 401) {
          err.textContent = "The server refused this token.";
          input.setAttribute("aria-invalid", "true");
          input.select();
          return;
        }
        token = t;
        (remember.checked ? localStorage : sessionStorage).setItem(KEY, t);
        dialog.close();
        dialog.remove();
        onTokenChange();
        resolve();
      } catch (x) {
        err.textContent = `Could not reach the server: ${(x as Error).message}`;
      } finally {
        submit.disabled = false;
      }
    });
    document.body.appendChild(dialog);
    dialog.showModal();
    input.focus();
  });
}

/** download fetches path with the given Accept and saves the reply as filename. */
export async function download(path: string, body: unknown, accept: string, filename: string): Promise<void> {
  const r = await call("POST", path, { body, accept });
  const blob = await r.blob();
  const url = URL.createObjectURL(blob);
  const a = h("a", { href: url, download: filename, hidden: true });
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}
