// One collection: its options, its retention rules, with forms to add,
// change and drop a rule, and its rollups (./rollups.ts). A change that
// would delete data shows the dry run first ("this will delete N
// measurements in M buckets now") and waits for the user to confirm it.

import { APIError, call, collPath, send } from "../api";
import { clear, h, uid, type Child } from "../dom";
import { count, dateOf, fmtBytes, fmtDuration, fmtInt, json, passSummary, timeEl } from "../format";
import {
  countFind, describe, metaLabel, metaValues, preview, runTTLPass,
  type Collection, type IndexSpec, type Preview,
} from "../model";
import { badge, bytesPerPoint, confirmBox, errorBox, outOfRange, storageText, suspendedWarning } from "../widgets";
import { rollupNote, rollupsSection } from "./rollups";

const units: [string, number][] = [["seconds", 1], ["minutes", 60], ["hours", 3600], ["days", 86400]];

/** ttlInput is a value and a unit; value() is what the API is sent. */
function ttlInput(initial: number | null, label: string): { el: HTMLElement; input: HTMLInputElement; error: HTMLElement; value(): number | string } {
  const id = uid("ttl");
  let unit = 1;
  for (const [, n] of units) if (initial !== null && initial > 0 && initial % n === 0) unit = n;
  const input = h("input", {
    id, name: "expireAfterSeconds", inputmode: "numeric", autocomplete: "off", spellcheck: "false", class: "ttl-value",
    value: initial === null ? "" : String(initial / unit), "aria-describedby": `${id}-err`,
  });
  const sel = h("select", { "aria-label": `${label}: unit` },
    units.map(([u, n]) => h("option", { value: String(n), selected: n === unit }, u)));
  const error = h("p", { class: "field-error", id: `${id}-err`, role: "alert" });
  input.addEventListener("input", () => { input.removeAttribute("aria-invalid"); error.textContent = ""; });
  const el = h("div", { class: "field" }, h("label", { for: id }, label), h("div", { class: "inline" }, input, sel), error);
  return {
    el, input, error,
    value() {
      const t = input.value.trim();
      // A number goes as a number, in seconds; anything else goes as
      // typed, so that the API's own message says what is wrong with it.
      return /^[-+]?\d+(\.\d+)?$/.test(t) ? Number(t) * Number(sel.value) : t;
    },
  };
}

function showError(target: { input: HTMLElement; error: HTMLElement }, e: unknown): void {
  target.error.textContent = e instanceof APIError ? e.message : (e as Error).message;
  target.input.setAttribute("aria-invalid", "true");
  target.input.focus();
}

function sum(p: Preview): { measurements: number; buckets: number; hidden: number } {
  let measurements = 0, buckets = 0, hidden = 0;
  for (const r of p.rules) { measurements += r.measurements; buckets += r.buckets; hidden += r.hiddenMeasurements; }
  return { measurements, buckets, hidden };
}

/** previewText turns the dry runs of the current rules and of a proposal into sentences. */
function previewText(now: Preview, next: Preview): { text: Child[]; deletes: boolean } {
  if (next.suspended) {
    return { deletes: false, text: [h("strong", null, "Nothing will be deleted now:"), " expiry is suspended on this collection (the 1970-2038 rule) until the out-of-range data is deleted."] };
  }
  const a = sum(now), b = sum(next);
  if (b.measurements === 0 && b.hidden === 0) return { deletes: false, text: [h("strong", null, "This change deletes nothing now.")] };
  const text: Child[] = [];
  if (b.measurements > 0) {
    text.push(h("strong", { class: "dry-run-figure" }, `This will delete ${fmtInt(b.measurements)} measurement${b.measurements === 1 ? "" : "s"} in ${fmtInt(b.buckets)} bucket${b.buckets === 1 ? "" : "s"} now.`));
    if (a.measurements > 0) text.push(` ${fmtInt(a.measurements)} of them have expired under the current rules already and await the TTL monitor.`);
  } else {
    text.push(h("strong", { class: "dry-run-figure" }, "This will delete no bucket now."));
  }
  if (b.hidden > a.hidden) text.push(` Reads stop returning ${fmtInt(b.hidden - a.hidden)} more measurement${b.hidden - a.hidden === 1 ? "" : "s"} at once.`);
  return { deletes: b.measurements > 0 || b.hidden > a.hidden, text };
}

export async function collectionPage(root: HTMLElement, name: string, signal: AbortSignal): Promise<void> {
  const notices = h("div", { class: "notices", role: "status", "aria-live": "polite" });
  const body = h("div", null, h("p", { class: "loading" }, "Loading…"));
  root.append(notices, body);

  const notify = (...msg: Child[]) => clear(notices, h("div", { class: "notice ok" }, msg));

  async function runPass(btn: HTMLButtonElement): Promise<void> {
    btn.disabled = true;
    try {
      const r = await runTTLPass();
      notify(passSummary(r));
      await load();
    } catch (e) {
      clear(notices, errorBox(e));
    } finally {
      btn.disabled = false;
    }
  }

  // The rollups section polls until the page is left or drawn again.
  let rollupsCtl: AbortController | null = null;
  signal.addEventListener("abort", () => rollupsCtl?.abort());

  async function load(): Promise<void> {
    const [c, indexes] = await Promise.all([
      describe(name, signal),
      call("GET", collPath(name, "/indexes"), { signal }).then((r) => r.json() as Promise<IndexSpec[]>),
    ]);
    rollupsCtl?.abort();
    rollupsCtl = new AbortController();
    const passBtn = h("button", { type: "button", "data-action": "ttl-run" }, "Run a TTL pass now");
    passBtn.addEventListener("click", () => void runPass(passBtn));
    clear(body,
      h("div", { class: "page-head" },
        h("h1", null, h("span", { class: "muted" }, "Collection "), c.name),
        h("div", { class: "actions" },
          c.type === "timeseries" ? h("a", { class: "button", href: `#/explore?c=${encodeURIComponent(c.name)}` }, "Explore") : null,
          c.type === "timeseries" ? passBtn : null)),
      rollupNote(c),
      stats(c),
      suspendedWarning(c, c.ttl?.suspended && c.ttl.outOfRangeBuckets > 0 ? fixRange(c) : undefined),
      h("div", { class: "columns" },
        h("section", { class: "card", "aria-labelledby": "opt-h" }, h("h2", { id: "opt-h" }, "Options"), options(c)),
        c.type === "timeseries"
          ? h("section", { class: "card grow", "aria-labelledby": "ret-h" }, h("h2", { id: "ret-h" }, "Retention rules"), retention(c, indexes))
          : h("section", { class: "card grow" }, h("h2", null, "Indexes"), indexList(indexes))),
      c.type === "timeseries"
        ? h("section", { class: "card", "aria-labelledby": "rollups-h" }, h("h2", { id: "rollups-h" }, "Rollups"), rollupsSection(c, rollupsCtl.signal, notify))
        : null,
      dropZone(c));
  }

  function stats(c: Collection): HTMLElement {
    const next = dateOf(c.ttl?.nextExpiry ?? null);
    const stat = (label: string, value: Child, id: string) =>
      h("div", { class: "stat" }, h("dt", null, label), h("dd", { "data-testid": id }, value));
    return h("dl", { class: "stats" },
      stat("Measurements", fmtInt(c.count), "stat-count"),
      stat("Buckets", fmtInt(c.buckets), "stat-buckets"),
      stat("Storage", storageText(c), "stat-storage"),
      stat("Bytes/point", bytesPerPoint(c), "stat-bpp"),
      c.archive ? stat("Archived", [fmtInt(c.archive.measurements), h("span", { class: "muted small" },
        ` in ${fmtInt(c.archive.files)} file${c.archive.files === 1 ? "" : "s"}, ${fmtBytes(c.archive.bytes)}`)], "stat-archived") : null,
      stat("Next expiry", c.ttl?.suspended ? badge("suspended", "warn")
        : next ? [timeEl(next), next.getTime() < Date.now() ? h("span", { class: "muted small due" }, " due: awaiting the TTL monitor") : null]
          : h("span", { class: "muted" }, "none"), "stat-next"));
  }

  function options(c: Collection): HTMLElement {
    const ts = c.options.timeseries;
    const rows: [string, Child][] = [];
    if (ts) {
      rows.push(["Time field", h("code", null, ts.timeField)]);
      rows.push(["Meta field", ts.metaField ? h("code", null, ts.metaField) : h("span", { class: "muted" }, "none")]);
      rows.push(["Bucketing", ts.granularity ? `granularity ${ts.granularity}`
        : `span ${fmtDuration(ts.bucketMaxSpanSeconds ?? 0)}, rounding ${fmtDuration(ts.bucketRoundingSeconds ?? 0)}`]);
    } else {
      rows.push(["Type", c.options.capped ? `capped (${fmtBytes(c.options.size ?? 0)}${c.options.max ? `, ${fmtInt(c.options.max)} documents` : ""})` : "documents"]);
    }
    if (c.created) rows.push(["Created", timeEl(new Date(c.created))]);
    const fields = Object.entries(c.fields ?? {});
    rows.push(["Fields", fields.length === 0 ? h("span", { class: "muted" }, "none yet")
      : h("ul", { class: "plain" }, fields.map(([f, t]) => h("li", null, h("code", null, f), " ", h("span", { class: "muted" }, t.join(", ")))))]);
    return h("dl", { class: "kv" }, rows.map(([k, v]) => [h("dt", null, k), h("dd", null, v)]));
  }

  function indexList(indexes: IndexSpec[]): HTMLElement {
    if (indexes.length === 0) return h("p", { class: "muted" }, "No secondary indexes.");
    return h("ul", { class: "plain" }, indexes.map((i) => h("li", null, h("code", null, i.name), " ", h("code", { class: "muted" }, json(i.key)),
      i.expireAfterSeconds !== undefined ? ` expire after ${fmtDuration(i.expireAfterSeconds)}` : "")));
  }

  function retention(c: Collection, indexes: IndexSpec[]): HTMLElement {
    const ttl = c.ttl!;
    const tbody = h("tbody");
    const table = h("table", { class: "data rules" },
      h("caption", { class: "sr-only" }, "Retention rules"),
      h("thead", null, h("tr", null,
        h("th", { scope: "col" }, "Rule"), h("th", { scope: "col" }, "Applies to"),
        h("th", { scope: "col" }, "Expire after"), h("th", { scope: "col" }, h("span", { class: "sr-only" }, "Actions")))),
      tbody);

    const collRow = h("tr", { "data-rule": "" },
      h("th", { scope: "row" }, "Collection"),
      h("td", null, "every series"),
      h("td", null, ttl.expireAfterSeconds === null ? h("span", { class: "muted" }, "off (kept for ever)") : durationCell(ttl.expireAfterSeconds)),
      h("td", { class: "row-actions" }, h("button", { type: "button", "data-action": "change", onclick: () => edit(collRow, null, ttl.expireAfterSeconds) }, "Change")));
    tbody.append(collRow);
    for (const ix of ttl.indexes) {
      const row = h("tr", { "data-rule": ix.name },
        h("th", { scope: "row" }, h("code", null, ix.name)),
        h("td", null, h("code", null, json(ix.partialFilterExpression ?? {}))),
        h("td", null, durationCell(ix.expireAfterSeconds)),
        h("td", { class: "row-actions" },
          h("button", { type: "button", "data-action": "change", onclick: () => edit(row, ix.name, ix.expireAfterSeconds) }, "Change"),
          h("button", { type: "button", "data-action": "drop", onclick: () => drop(row, ix.name) }, "Drop")));
      tbody.append(row);
    }
    const others = indexes.filter((i) => i.expireAfterSeconds === undefined);
    const note = ttl.indexes.length > 0
      ? h("p", { class: "help" }, "A series keeps the shortest of the rules that match it: a per-sensor rule can only shorten the collection's.")
      : h("p", { class: "help" }, "No per-sensor rules yet. Add one below to keep some sensors for less time than the rest.");

    /** editor opens an inline form under a rule's row. */
    function openRow(row: HTMLElement, content: HTMLElement, close: () => void): void {
      tbody.querySelectorAll("tr.editor").forEach((r) => r.remove());
      const ed = h("tr", { class: "editor" }, h("td", { colspan: "4" }, content));
      ed.addEventListener("keydown", (e) => { if (e.key === "Escape") close(); });
      row.after(ed);
    }

    /** closeRow closes a row's editor and gives the focus back to the button that opened it. */
    function closeRow(row: HTMLElement, action: string): void {
      if (row.nextElementSibling?.classList.contains("editor")) row.nextElementSibling.remove();
      row.querySelector<HTMLElement>(`[data-action="${action}"]`)?.focus();
    }

    function edit(row: HTMLElement, index: string | null, current: number | null): void {
      const t = ttlInput(current, index === null ? "Collection expire after" : `Expire after for ${index}`);
      const dry = h("div");
      const close = () => closeRow(row, "change");
      const propose = async (v: number | string) => {
        dry.replaceChildren();
        const body = index === null ? { expireAfterSeconds: v } : { indexes: { [index]: v } };
        let next: Preview, now: Preview;
        try {
          [next, now] = await Promise.all([preview(c.name, body), preview(c.name, {})]);
        } catch (e) {
          showError(t, e);
          return;
        }
        const { text, deletes } = previewText(now, next);
        dry.append(confirmBox(text, deletes, deletes ? "Apply and delete" : "Apply", async () => {
          const r = await send<Record<string, unknown>>("PATCH", collPath(c.name),
            index === null ? { expireAfterSeconds: v } : { index: { name: index, expireAfterSeconds: v } });
          notify(`${index === null ? "Collection rule" : `Rule ${index}`} changed from ${fmtOld(r.expireAfterSeconds_old)} to ${fmtOld(r.expireAfterSeconds_new)}.`);
          await load();
        }, close));
      };
      const form = h("form", { class: "rule-form", novalidate: true },
        t.el,
        h("div", { class: "actions" },
          h("button", { type: "submit", class: "primary" }, "Preview change"),
          index === null && current !== null ? h("button", { type: "button", onclick: () => void propose("off") }, "Turn off") : null,
          h("button", { type: "button", onclick: close }, "Close")),
        dry);
      form.addEventListener("submit", (e) => { e.preventDefault(); void propose(t.value()); });
      openRow(row, form, close);
      t.input.focus();
      t.input.select();
    }

    function drop(row: HTMLElement, index: string): void {
      const close = () => closeRow(row, "drop");
      openRow(row, confirmBox([
        h("strong", null, "Dropping a rule deletes nothing. "),
        `The series it matched fall back to the other rules${ttl.expireAfterSeconds === null ? " (the collection has none: kept for ever unless another rule matches)" : ` (at most ${fmtDuration(ttl.expireAfterSeconds)})`}.`,
      ], false, `Drop ${index}`, async () => {
        await send("DELETE", collPath(c.name, `/indexes/${encodeURIComponent(index)}`), undefined);
        notify(`Rule ${index} dropped.`);
        await load();
      }, close), close);
    }

    return h("div", null, table, note, addRule(c),
      others.length > 0 ? h("div", null, h("h3", null, "Other indexes"), indexList(others)) : null);
  }

  function addRule(c: Collection): HTMLElement {
    const ts = c.options.timeseries!;
    const mf = ts.metaField;
    if (!mf) return h("p", { class: "help" }, "Per-sensor rules need a meta field; this collection has none.");
    const nameIn = h("input", { id: uid("rn"), name: "name", autocomplete: "off", spellcheck: "false", placeholder: "e.g. south_day" });
    const nameErr = h("p", { class: "field-error", id: `${nameIn.id}-err`, role: "alert" });
    nameIn.setAttribute("aria-describedby", nameErr.id);
    const sensor = h("select", { id: uid("rs"), name: "sensor" }, h("option", { value: "" }, "Loading sensors…"));
    const filterIn = h("textarea", { id: uid("rf"), name: "filter", rows: "2", spellcheck: "false", hidden: true, placeholder: `{"${mf}": {"$in": ["a", "b"]}}` });
    const filterErr = h("p", { class: "field-error", id: `${sensor.id}-err`, role: "alert" });
    sensor.setAttribute("aria-describedby", filterErr.id);
    filterIn.setAttribute("aria-describedby", filterErr.id);
    const t = ttlInput(null, "Expire after");
    const dry = h("div");
    let values: unknown[] = [];
    void metaValues(c, 1000, signal).then((vs) => {
      values = vs;
      clear(sensor,
        vs.length === 0 ? h("option", { value: "" }, "No sensors yet") : h("option", { value: "" }, "Choose a sensor…"),
        vs.map((v, i) => h("option", { value: String(i) }, metaLabel(v))),
        h("option", { value: "filter" }, "Other: a filter on the meta field…"));
    }).catch(() => clear(sensor, h("option", { value: "filter" }, "A filter on the meta field…")));
    sensor.addEventListener("change", () => { filterIn.hidden = sensor.value !== "filter"; filterErr.textContent = ""; });

    const filterTarget = () => ({ input: sensor.value === "filter" ? filterIn : sensor, error: filterErr });
    function filter(): Record<string, unknown> {
      if (sensor.value === "filter") {
        try {
          return JSON.parse(filterIn.value);
        } catch (e) {
          throw new Error(`The filter is not valid JSON: ${(e as Error).message}`);
        }
      }
      if (sensor.value === "") throw new Error("Choose a sensor, or a filter.");
      return { [mf!]: values[Number(sensor.value)] };
    }

    const form = h("form", { class: "grid-form add-rule", novalidate: true, "aria-labelledby": "add-h" },
      h("h3", { id: "add-h", class: "span-all" }, "Add a per-sensor rule"),
      h("div", { class: "field" }, h("label", { for: sensor.id }, "Sensors"), sensor, filterIn, filterErr),
      t.el,
      h("div", { class: "field" }, h("label", { for: nameIn.id }, "Rule name ", h("span", { class: "muted" }, "(optional)")), nameIn, nameErr),
      h("div", { class: "actions span-all" }, h("button", { type: "submit", class: "primary" }, "Preview rule")),
      h("div", { class: "span-all" }, dry));
    form.addEventListener("submit", async (e) => {
      e.preventDefault();
      dry.replaceChildren();
      for (const el of [filterErr, t.error, nameErr]) el.textContent = "";
      let f: Record<string, unknown>;
      try {
        f = filter();
      } catch (x) {
        showError(filterTarget(), x);
        return;
      }
      const v = t.value();
      const body: Record<string, unknown> = { key: { [ts.timeField]: 1 }, expireAfterSeconds: v, partialFilterExpression: f };
      if (nameIn.value.trim()) body.name = nameIn.value.trim();
      // The field an API error belongs to, from its message.
      const target = (x: unknown) => {
        const msg = x instanceof APIError ? x.message : "";
        return /expireAfterSeconds/.test(msg) ? t : /name|IndexKeySpecs/i.test(msg) && !/filter/i.test(msg) ? { input: nameIn, error: nameErr } : filterTarget();
      };
      // The API's dry run of the rule as it would be created, validated
      // as the index itself will be.
      let next: Preview, now: Preview;
      try {
        [next, now] = await Promise.all([preview(c.name, { newIndex: body }), preview(c.name, {})]);
      } catch (x) {
        showError(target(x), x);
        return;
      }
      const { text, deletes } = previewText(now, next);
      if (deletes) text.push(" The TTL monitor deletes them on its next pass (the server starts one when a rule changes).");
      dry.append(confirmBox(text, deletes, deletes ? "Create rule and delete" : "Create rule", async () => {
        let r: { name: string };
        try {
          r = await send<{ name: string }>("POST", collPath(c.name, "/indexes"), body);
        } catch (x) {
          dry.replaceChildren();
          showError(target(x), x);
          return;
        }
        notify(`Rule ${r.name} created. The TTL monitor applies it on its next pass.`);
        await load();
      }, () => dry.replaceChildren()));
    });
    return form;
  }

  /** fixRange deletes what suspends expiry, after a dry run. */
  function fixRange(c: Collection): HTMLElement {
    const tf = c.options.timeseries!.timeField;
    const filters = outOfRange(tf);
    const dry = h("div");
    const btn = h("button", { type: "button", "data-action": "fix-range" }, "Delete the out-of-range measurements…");
    btn.addEventListener("click", async () => {
      dry.replaceChildren();
      let n: number;
      try {
        n = await countFind(c, { $or: filters });
      } catch (e) {
        dry.append(errorBox(e));
        return;
      }
      dry.append(confirmBox([h("strong", { class: "dry-run-figure" }, `This will delete ${fmtInt(n)} measurement${n === 1 ? "" : "s"} now`),
        ` (every measurement before 1970-01-01T00:00:00Z or after 2038-01-19T03:14:07Z). Then expiry resumes, and the collection's rules delete what has expired on the next TTL pass.`],
      true, `Delete ${fmtInt(n)}`, async () => {
        let deleted = 0;
        for (const filter of filters) deleted += (await send<{ deleted: number }>("POST", collPath(c.name, "/delete"), { filter })).deleted;
        notify(`Deleted ${fmtInt(deleted)} out-of-range measurement${deleted === 1 ? "" : "s"}: expiry resumes.`);
        await load();
      }, () => dry.replaceChildren()));
    });
    return h("div", null, h("div", { class: "actions" }, btn), dry);
  }

  function dropZone(c: Collection): HTMLElement {
    const input = h("input", { id: uid("dz"), autocomplete: "off", spellcheck: "false" });
    const dry = h("div");
    const form = h("form", { class: "stack", novalidate: true },
      h("label", { for: input.id }, "Type the collection's name to drop it and all its data"),
      h("div", { class: "inline" }, input, h("button", { type: "submit", class: "danger" }, "Drop collection…")), dry);
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      dry.replaceChildren();
      if (input.value !== c.name) {
        dry.append(h("p", { class: "field-error", role: "alert" }, `Type ${c.name} exactly.`));
        return;
      }
      dry.append(confirmBox([h("strong", { class: "dry-run-figure" }, `This will delete ${c.count === 1 ? "the" : "all"} ${count(c.count, "measurement")}${c.buckets !== undefined ? ` in ${count(c.buckets, "bucket")}` : ""} now`), ", and the collection's rules."],
        true, "Drop collection", async () => {
          await send("DELETE", collPath(c.name), undefined);
          location.hash = "#/collections";
        }, () => dry.replaceChildren()));
    });
    return h("details", { class: "card danger-zone" }, h("summary", null, "Drop this collection"), form);
  }

  await load();
}

function durationCell(sec: number): HTMLElement {
  return h("span", { title: `${fmtInt(sec)} seconds` }, fmtDuration(sec));
}

function fmtOld(v: unknown): string {
  return typeof v === "number" ? fmtDuration(v) : String(v ?? "off");
}
