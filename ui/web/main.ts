// The console's entry point: a hash router over four pages.

import "./style.css";
import { forgetToken, hasToken, setTokenListener, getJSON } from "./api";
import { clear, h } from "./dom";
import { timeZone } from "./format";
import { errorBox } from "./widgets";
import { collectionsPage } from "./pages/collections";
import { collectionPage } from "./pages/collection";
import { explorePage } from "./pages/explore";
import { serverPage } from "./pages/server";
import type { Status } from "./model";

export interface Route {
  page: string;
  parts: string[];
  query: URLSearchParams;
}

type Page = (root: HTMLElement, route: Route, signal: AbortSignal) => Promise<void>;

const pages: Record<string, Page> = {
  collections: (root, r, s) => (r.parts.length > 0 ? collectionPage(root, r.parts[0], s) : collectionsPage(root, s)),
  explore: (root, r, s) => explorePage(root, r.query, s),
  server: (root, _r, s) => serverPage(root, s),
};

function parse(hash: string): Route | null {
  if (hash === "" || hash === "#" || hash === "#/") return { page: "collections", parts: [], query: new URLSearchParams() };
  if (!hash.startsWith("#/")) return null;
  const [path, q] = hash.slice(2).split("?", 2);
  const [page, ...parts] = path.split("/").filter((p) => p !== "").map(decodeURIComponent);
  return { page, parts, query: new URLSearchParams(q ?? "") };
}

let current: AbortController | null = null;

async function render(): Promise<void> {
  const route = parse(location.hash);
  const main = document.getElementById("main")!;
  if (!route) return; // an in-page anchor such as the skip link
  current?.abort();
  const ctl = new AbortController();
  current = ctl;
  for (const a of document.querySelectorAll<HTMLAnchorElement>("nav a[data-nav]")) {
    if (a.dataset.nav === route.page) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  const page = pages[route.page];
  const root = h("div", { class: "page", "aria-busy": "true" });
  clear(main, root);
  if (!page) {
    clear(root, h("h1", null, "Not found"), h("p", null, "No such page. ", h("a", { href: "#/collections" }, "Go to the collections.")));
    return;
  }
  try {
    await page(root, route, ctl.signal);
  } catch (e) {
    if (ctl.signal.aborted) return;
    root.append(errorBox(e));
  } finally {
    root.removeAttribute("aria-busy");
  }
}

async function who(): Promise<void> {
  const el = document.getElementById("who")!;
  try {
    const st = await getJSON<Status>("/v1/status");
    clear(el,
      h("span", { title: `Times are shown in ${timeZone}; hover over a time for UTC.` }, `${st.host} · ${/^\d/.test(st.version) ? "v" : ""}${st.version} · ${timeZone}`),
      hasToken() ? h("button", { type: "button", class: "link", onclick: () => { forgetToken(); location.reload(); } }, "Forget token") : null);
  } catch {
    clear(el, h("span", { class: "muted" }, "server unreachable"));
  }
}

document.querySelector("[data-skip]")?.addEventListener("click", (e) => {
  e.preventDefault();
  document.getElementById("main")!.focus();
});
setTokenListener(() => void who());
window.addEventListener("hashchange", () => void render());
void render();
void who();
