// The collections page: every collection with its size and retention, and
// a clear warning on those whose expiry is suspended.

import { APIError, collPath, send } from "../api";
import { clear, h, uid } from "../dom";
import { fmtDuration, fmtInt, timeEl, dateOf } from "../format";
import { describe, listCollections, ttlSummary } from "../model";
import { badge, bytesPerPoint, storageText, suspendedWarning } from "../widgets";

export async function collectionsPage(root: HTMLElement, signal: AbortSignal): Promise<void> {
  const body = h("div", { class: "table-wrap" }, h("p", { class: "loading" }, "Loading collections…"));
  root.append(
    h("div", { class: "page-head" }, h("h1", null, "Collections")),
    body,
    createForm());
  const list = await listCollections(signal);
  const full = await Promise.all(list.map((c) => describe(c.name, signal)));
  if (full.length === 0) {
    clear(body, h("div", { class: "empty" },
      h("p", null, h("strong", null, "No collections yet.")),
      h("p", null, "Create a time-series collection below, or with ", h("code", null, "PUT /v1/collections/{name}"),
        "; InfluxDB line protocol writes create theirs on first write.")));
    return;
  }
  const rows: HTMLElement[] = [];
  for (const c of full) {
    const warn = suspendedWarning(c);
    const next = dateOf(c.ttl?.nextExpiry ?? null);
    rows.push(h("tr", { class: warn ? "has-warning" : "" },
      h("th", { scope: "row" }, h("a", { href: `#/collections/${encodeURIComponent(c.name)}` }, c.name)),
      h("td", null, badge(c.type === "timeseries" ? "time series" : c.type)),
      h("td", { class: "num" }, fmtInt(c.count)),
      h("td", { class: "num" }, fmtInt(c.buckets)),
      h("td", { class: "num" }, storageText(c)),
      h("td", { class: "num" }, bytesPerPoint(c)),
      h("td", null,
        warn ? badge("expiry suspended", "warn") : null, " ",
        ttlSummary(c, fmtDuration),
        next && !c.ttl?.suspended ? h("div", { class: "muted small" }, "next expiry ", timeEl(next)) : null)));
    if (warn) rows.push(h("tr", { class: "warning-row" }, h("td", { colspan: "7" }, warn)));
  }
  clear(body, h("table", { class: "data" },
    h("caption", { class: "sr-only" }, "Collections"),
    h("thead", null, h("tr", null,
      h("th", { scope: "col" }, "Name"), h("th", { scope: "col" }, "Type"),
      h("th", { scope: "col", class: "num" }, "Measurements"), h("th", { scope: "col", class: "num" }, "Buckets"),
      h("th", { scope: "col", class: "num" }, "Storage"), h("th", { scope: "col", class: "num" }, "Bytes/point"),
      h("th", { scope: "col" }, "Retention"))),
    h("tbody", null, rows)));
}

function field(label: string, input: HTMLInputElement | HTMLSelectElement, help?: string): HTMLElement {
  input.id ||= uid("f");
  const err = h("p", { class: "field-error", id: `${input.id}-err`, role: "alert" });
  input.setAttribute("aria-describedby", `${input.id}-err`);
  return h("div", { class: "field" }, h("label", { for: input.id }, label), input, help ? h("p", { class: "help" }, help) : null, err);
}

/** createForm creates a time-series collection with PUT /v1/collections/{name}. */
function createForm(): HTMLElement {
  const name = h("input", { name: "name", required: true, autocomplete: "off", spellcheck: "false", placeholder: "weather" });
  const tf = h("input", { name: "timeField", value: "timestamp", required: true, spellcheck: "false" });
  const mf = h("input", { name: "metaField", value: "sensor", spellcheck: "false" });
  const gran = h("select", { name: "granularity" },
    h("option", { value: "seconds" }, "seconds (1 h buckets)"),
    h("option", { value: "minutes" }, "minutes (1 d buckets)"),
    h("option", { value: "hours" }, "hours (30 d buckets)"));
  const ttl = h("input", { name: "expireAfterSeconds", inputmode: "numeric", placeholder: "none", spellcheck: "false" });
  const err = h("div", { role: "alert" });
  const form = h("form", { class: "grid-form", novalidate: true },
    field("Name", name), field("Time field", tf), field("Meta field (sensor)", mf, "optional"),
    field("Granularity", gran), field("Expire after (seconds)", ttl, "optional; empty keeps data for ever"),
    h("div", { class: "actions" }, h("button", { type: "submit", class: "primary" }, "Create collection")), err);
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    err.replaceChildren();
    for (const el of form.querySelectorAll(".field-error")) el.textContent = "";
    const ts: Record<string, unknown> = { timeField: tf.value.trim(), granularity: gran.value };
    if (mf.value.trim()) ts.metaField = mf.value.trim();
    const body: Record<string, unknown> = { timeseries: ts };
    if (ttl.value.trim()) body.expireAfterSeconds = Number.isFinite(Number(ttl.value)) ? Number(ttl.value) : ttl.value.trim();
    try {
      await send("PUT", collPath(name.value.trim() || "-"), body);
      location.hash = `#/collections/${encodeURIComponent(name.value.trim())}`;
    } catch (x) {
      const msg = x instanceof APIError ? x.message : String(x);
      // Put the API's message next to the field it names.
      const target = /expireAfterSeconds/.test(msg) ? ttl : /metaField/.test(msg) ? mf : /timeField/.test(msg) ? tf
        : /granularity/.test(msg) ? gran : name;
      document.getElementById(`${target.id}-err`)!.textContent = msg;
      target.setAttribute("aria-invalid", "true");
      target.focus();
    }
  });
  return h("details", { class: "card create" }, h("summary", null, "New time-series collection"), form);
}
