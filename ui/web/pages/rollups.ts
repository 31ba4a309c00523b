// A time-series collection's rollups (docs/rollups.md): the list with each
// rollup's lag, refreshed while the page is open, Stop after a confirm, and
// a form to add one. And the note on a rollup collection's own page.

import { APIError, collPath, send } from "../api";
import { clear, h, uid, type Child } from "../dom";
import { fmtDuration, fmtInt, json } from "../format";
import { listRollups, numericFields, rollupFuncs, type Collection, type Rollup } from "../model";
import { confirmBox, errorBox } from "../widgets";

/** How often the list (and its lag) is read again while the page is open, in ms. */
export const rollupPollMillis = 3000;

/** lagText is "caught up" or how far the rollup is behind. */
export function lagText(r: Rollup): string {
  if (r.lagSeconds <= 0 && r.pendingSeries === 0) return "caught up";
  const s = Math.max(1, Math.round(r.lagSeconds));
  return s < 120 ? `${fmtInt(s)} s behind` : `${fmtDuration(s)} behind`;
}

/** rollupNote is the line on a rollup collection's page naming its source. */
export function rollupNote(c: Collection): HTMLElement | null {
  const r = c.options.rollupOf;
  if (!r) return null;
  return h("p", { class: "notice info rollup-of", "data-testid": "rollup-of" },
    "rollup of ", h("a", { href: `#/collections/${encodeURIComponent(r.source)}` }, r.source),
    ` (window ${r.window}; ${r.fields.join(", ")} × ${r.funcs.join(", ")}`,
    r.partialFilterExpression ? [", sensors ", h("code", null, json(r.partialFilterExpression))] : null, ")");
}

/**
 * rollupsSection lists c's rollups and offers Stop and Add. It reads the
 * list again every few seconds until signal aborts (the user leaves the
 * page); notify reports what was done.
 */
export function rollupsSection(c: Collection, signal: AbortSignal, notify: (...msg: Child[]) => void): HTMLElement {
  const tbody = h("tbody");
  const status = h("div", { role: "status" });
  const table = h("table", { class: "data rollups", hidden: true },
    h("caption", { class: "sr-only" }, `Rollups of ${c.name}`),
    h("thead", null, h("tr", null,
      h("th", { scope: "col" }, "Rollup"), h("th", { scope: "col" }, "Window"), h("th", { scope: "col" }, "Keeps"),
      h("th", { scope: "col" }, "Retention"), h("th", { scope: "col" }, "Lag"), h("th", { scope: "col", class: "num" }, "Pending sensors"),
      h("th", { scope: "col" }, "Last error"), h("th", { scope: "col" }, h("span", { class: "sr-only" }, "Actions")))),
    tbody);
  const empty = h("p", { class: "help", hidden: true }, "No rollups yet. A rollup keeps per-sensor aggregates per window (hourly min, average and max, say) as a collection of its own, which outlives the raw data's expiry.");
  let shown = "";

  function cells(r: Rollup): Child[] {
    return [
      h("td", { "data-col": "lag" }, lagText(r)),
      h("td", { class: "num", "data-col": "pending" }, fmtInt(r.pendingSeries)),
      h("td", { "data-col": "error" }, r.lastError ? h("span", { class: "field-error" }, r.lastError) : h("span", { class: "muted" }, "none")),
    ];
  }

  function row(r: Rollup): HTMLElement {
    const stop = h("button", { type: "button", "data-action": "stop" }, "Stop");
    const tr = h("tr", { "data-rollup": r.name },
      h("th", { scope: "row" }, h("a", { href: `#/collections/${encodeURIComponent(r.name)}` }, r.name)),
      h("td", null, r.spec.window),
      h("td", null, h("code", null, r.spec.fields.join(", ")), " × ", r.spec.funcs.join(", "),
        r.spec.partialFilterExpression ? h("div", { class: "muted small" }, "sensors ", h("code", null, json(r.spec.partialFilterExpression))) : null),
      h("td", null, r.expireAfterSeconds === undefined ? h("span", { class: "muted" }, "kept for ever") : h("span", { title: `${fmtInt(r.expireAfterSeconds)} seconds` }, fmtDuration(r.expireAfterSeconds))),
      cells(r),
      h("td", { class: "row-actions" }, stop));
    stop.addEventListener("click", () => {
      tbody.querySelectorAll("tr.editor").forEach((e) => e.remove());
      const close = () => { ed.remove(); stop.focus(); };
      const ed = h("tr", { class: "editor" }, h("td", { colspan: "8" }, confirmBox([
        h("strong", null, `Stop maintaining ${r.name}? `),
        `It no longer follows what is written to ${c.name}. The collection ${r.name} stays with what it holds; drop it on its own page to delete it.`,
      ], false, `Stop ${r.name}`, async () => {
        await send("DELETE", collPath(c.name, `/rollups/${encodeURIComponent(r.name)}`), undefined);
        await refresh();
        notify(`Rollup ${r.name} stopped; the collection ${r.name} stays.`);
      }, close, "Confirm")));
      ed.addEventListener("keydown", (e) => { if (e.key === "Escape") close(); });
      tr.after(ed);
    });
    return tr;
  }

  function render(list: Rollup[]): void {
    const names = list.map((r) => r.name).join("\n");
    table.hidden = list.length === 0;
    empty.hidden = list.length > 0;
    if (names === shown) {
      // The same rollups: only their state changes; an open confirm stays.
      for (const r of list) {
        const tr = tbody.querySelector<HTMLElement>(`tr[data-rollup="${CSS.escape(r.name)}"]`);
        if (!tr) continue;
        tr.querySelectorAll("td[data-col]").forEach((td) => td.remove());
        tr.querySelector("td.row-actions")!.before(...(cells(r) as Node[]));
      }
      return;
    }
    shown = names;
    clear(tbody, list.map(row));
  }

  async function refresh(): Promise<void> {
    try {
      render(await listRollups(c.name, signal));
      status.replaceChildren();
    } catch (e) {
      if (!signal.aborted) clear(status, errorBox(e));
    }
  }

  // Lag changes while the page is open: read the list again until the
  // user leaves the page.
  let timer = 0;
  const poll = async () => {
    await refresh();
    if (!signal.aborted) timer = window.setTimeout(() => void poll(), rollupPollMillis);
  };
  signal.addEventListener("abort", () => window.clearTimeout(timer));
  void poll();

  return h("div", null, status, table, empty, addForm(c, notify, refresh));
}

/** addForm creates a rollup; the API's message shows when it refuses. */
function addForm(c: Collection, notify: (...msg: Child[]) => void, refresh: () => Promise<void>): HTMLElement {
  const mf = c.options.timeseries?.metaField;
  const fields = numericFields(c);
  const ids = { name: uid("ro"), window: uid("ro"), days: uid("ro"), filter: uid("ro") };
  const nameIn = h("input", { id: ids.name, name: "rollup-name", autocomplete: "off", spellcheck: "false", required: true, placeholder: `e.g. ${c.name}_hourly` });
  const windowIn = h("input", { id: ids.window, name: "window", autocomplete: "off", spellcheck: "false", value: "1h", "aria-describedby": `${ids.window}-help` });
  const daysIn = h("input", { id: ids.days, name: "retention-days", inputmode: "numeric", autocomplete: "off", placeholder: "kept for ever", "aria-describedby": `${ids.days}-help` });
  const filterIn = h("textarea", { id: ids.filter, name: "sensor-filter", rows: "2", spellcheck: "false", placeholder: mf ? `{"${mf}": {"$in": ["a", "b"]}}` : "", disabled: !mf });
  const fieldBoxes = fields.map((f, i) => h("input", { type: "checkbox", name: "field", value: f, checked: i === 0 }));
  // Before any data there is no field to choose: they are typed.
  const fieldsIn = h("input", { name: "fields", autocomplete: "off", spellcheck: "false", placeholder: "temp, humidity", "aria-label": "Fields, separated by commas" });
  const funcBoxes = rollupFuncs.map((f) => h("input", { type: "checkbox", name: "func", value: f, checked: ["min", "avg", "max", "count"].includes(f) }));
  const err = h("div", { class: "form-error", role: "alert" });
  const submit = h("button", { type: "submit", class: "primary" }, "Add rollup");
  const form = h("form", { class: "grid-form add-rollup", novalidate: true, "aria-labelledby": "add-rollup-h" },
    h("h3", { id: "add-rollup-h", class: "span-all" }, "Add a rollup"),
    h("div", { class: "field" }, h("label", { for: ids.name }, "Rollup name"), nameIn,
      h("p", { class: "help" }, "A new collection of that name holds the rollup.")),
    h("div", { class: "field" }, h("label", { for: ids.window }, "Window"), windowIn,
      h("p", { class: "help", id: `${ids.window}-help` }, "As 90s, 15m, 1h, 1d or 1w.")),
    h("div", { class: "field" }, h("label", { for: ids.days }, "Retention in days ", h("span", { class: "muted" }, "(optional)")), daysIn,
      h("p", { class: "help", id: `${ids.days}-help` }, "The rollup's own expiry; the raw data's does not touch it.")),
    h("fieldset", { class: "field checks" }, h("legend", null, "Fields"),
      fields.length === 0 ? [fieldsIn, h("p", { class: "help" }, "No numeric field yet: name them, separated by commas.")]
        : fieldBoxes.map((b) => h("label", { class: "check" }, b, " ", h("code", null, b.value)))),
    h("fieldset", { class: "field checks" }, h("legend", null, "Functions"),
      funcBoxes.map((b) => h("label", { class: "check" }, b, " ", b.value))),
    h("div", { class: "field wide" }, h("label", { for: ids.filter }, "Sensors ", h("span", { class: "muted" }, "(optional filter on the meta field, JSON)")), filterIn),
    h("div", { class: "actions span-all" }, submit),
    h("div", { class: "span-all" }, err));
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    err.replaceChildren();
    for (const el of [nameIn, windowIn, daysIn, filterIn, fieldsIn]) el.removeAttribute("aria-invalid");
    const fail = (msg: string, input?: HTMLElement) => {
      clear(err, h("p", { class: "field-error" }, msg));
      input?.setAttribute("aria-invalid", "true");
      input?.focus();
    };
    const name = nameIn.value.trim();
    if (!name) return fail("Give the rollup a name.", nameIn);
    const body: Record<string, unknown> = {
      window: windowIn.value.trim(),
      fields: fields.length === 0 ? fieldsIn.value.split(",").map((f) => f.trim()).filter((f) => f !== "")
        : fieldBoxes.filter((b) => b.checked).map((b) => b.value),
      funcs: funcBoxes.filter((b) => b.checked).map((b) => b.value),
    };
    const days = daysIn.value.trim();
    // A number of days goes in seconds; anything else as typed, so that
    // the API's own message says what is wrong with it.
    if (days) body.expireAfterSeconds = /^\d+(\.\d+)?$/.test(days) ? Math.round(Number(days) * 86400) : days;
    if (filterIn.value.trim()) {
      try {
        body.partialFilterExpression = JSON.parse(filterIn.value);
      } catch (x) {
        return fail(`The sensor filter is not valid JSON: ${(x as Error).message}`, filterIn);
      }
    }
    submit.disabled = true;
    try {
      const r = await send<{ name: string; created: boolean }>("PUT", collPath(c.name, `/rollups/${encodeURIComponent(name)}`), body);
      nameIn.value = "";
      await refresh();
      notify(r.created ? `Rollup ${r.name} created: it rolls up what ${c.name} holds in the background.` : `Rollup ${r.name} exists already, as asked.`);
    } catch (x) {
      const msg = x instanceof APIError ? x.message : (x as Error).message;
      // The input the API's message is about, from its message.
      const input = /window/i.test(msg) ? windowIn : /expireAfterSeconds/.test(msg) ? daysIn : /filter/i.test(msg) ? filterIn
        : /field/i.test(msg) && fields.length === 0 ? fieldsIn : /name|exists/i.test(msg) ? nameIn : undefined;
      fail(msg, input);
    } finally {
      submit.disabled = false;
    }
  });
  return form;
}
