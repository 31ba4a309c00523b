// Explore: a windowed aggregate (min/avg/max band) of one field over a
// time range, for one meta value, a filter, or all series; zoom by
// dragging; a table view; downloads as CSV or Arrow. The part of the range
// older than the raw data held is read from a rollup of the field, when
// the collection has one (docs/rollups.md).

import { call, collPath, download, send } from "../api";
import { clear, h, uid } from "../dom";
import { fmtDuration, fmtInt, fmtNum, timeEl, timeZone } from "../format";
import { describe, listCollections, listRollups, metaLabel, metaValues, numericFields, windowSeconds, type Rollup } from "../model";
import { Chart, colors } from "../chart";
import { errorBox } from "../widgets";

const presets: [string, string, number][] = [
  ["1h", "Last hour", 3600], ["6h", "Last 6 hours", 6 * 3600], ["24h", "Last 24 hours", 86400],
  ["7d", "Last 7 days", 7 * 86400], ["30d", "Last 30 days", 30 * 86400], ["all", "All data", 0], ["custom", "Custom range", 0],
];
const windows = [1, 5, 10, 30, 60, 300, 600, 900, 1800, 3600, 3 * 3600, 6 * 3600, 12 * 3600, 86400, 7 * 86400, 30 * 86400];

/** autoWindow is the smallest round window giving at most 400 points over span seconds. */
export function autoWindow(span: number): number {
  for (const w of windows) if (span / w <= 400) return w;
  return Math.ceil(span / 400 / 86400) * 86400;
}

/**
 * chartRollup picks the rollup a chart of field reads the older part of its
 * range from, with chart windows of w seconds: one that keeps the field's
 * avg for every sensor (no sensor filter), the coarsest whose window is at
 * most w, else the finest. null when there is none.
 */
export function chartRollup(rollups: Rollup[], field: string, w: number): { r: Rollup; win: number } | null {
  const ok = rollups
    .filter((r) => !r.spec.partialFilterExpression && r.spec.fields.includes(field) && r.spec.funcs.includes("avg"))
    .map((r) => ({ r, win: windowSeconds(r.spec.window) }))
    .filter((x) => Number.isFinite(x.win) && x.win > 0)
    .sort((a, b) => a.win - b.win);
  if (ok.length === 0) return null;
  return ok.filter((x) => x.win <= w).pop() ?? ok[0];
}

/** toLocalInput writes d for an <input type="datetime-local">. */
function toLocalInput(d: Date): string {
  const p = (n: number) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}T${p(d.getHours())}:${p(d.getMinutes())}`;
}

export async function explorePage(root: HTMLElement, query: URLSearchParams, signal: AbortSignal): Promise<void> {
  root.append(h("div", { class: "page-head" }, h("h1", null, "Explore")));
  const cols = (await listCollections(signal)).filter((c) => c.type === "timeseries");
  if (cols.length === 0) {
    root.append(h("div", { class: "empty" }, h("p", null, h("strong", null, "Nothing to explore yet.")),
      h("p", null, "Create a time-series collection on the ", h("a", { href: "#/collections" }, "Collections"), " page and write measurements to it; they can be plotted here.")));
    return;
  }
  const cname = query.get("c") && cols.some((c) => c.name === query.get("c")) ? query.get("c")! : cols[0].name;
  const c = await describe(cname, signal);
  const ts = c.options.timeseries!;
  const mf = ts.metaField;
  const fields = numericFields(c);
  // Rollups maintained from this collection: charts read them where the
  // raw data is gone, and the series offered include those only they hold.
  const rollups = await listRollups(c.name, signal).catch(() => [] as Rollup[]);
  const values = mf ? await seriesValues() : [];

  async function seriesValues(): Promise<unknown[]> {
    const lists = await Promise.all([metaValues(c, 1000, signal),
      ...rollups.filter((r) => !r.spec.partialFilterExpression && r.spec.funcs.includes("avg"))
        .map((r) => describe(r.name, signal).then((rc) => metaValues(rc, 1000, signal)).catch(() => []))]);
    const seen = new Map<string, unknown>();
    for (const v of lists.flat()) seen.set(JSON.stringify(v), v);
    return [...seen.entries()].sort(([a], [b]) => a.localeCompare(b)).map(([, v]) => v).slice(0, 1000);
  }

  // Controls.
  const ids = { c: uid("x"), s: uid("x"), f: uid("x"), field: uid("x"), range: uid("x"), from: uid("x"), to: uid("x"), w: uid("x") };
  const collSel = h("select", { id: ids.c, name: "c" }, cols.map((x) => h("option", { value: x.name, selected: x.name === cname }, x.name)));
  collSel.addEventListener("change", () => { location.hash = `#/explore?c=${encodeURIComponent(collSel.value)}`; });
  const sIn = query.get("s");
  const sIndex = sIn === null ? -1 : values.findIndex((v) => JSON.stringify(v) === sIn);
  const seriesSel = h("select", { id: ids.s, name: "s", disabled: !mf },
    h("option", { value: "all" }, mf ? "All series, aggregated" : "All measurements"),
    values.map((v, i) => h("option", { value: String(i), selected: i === sIndex }, metaLabel(v))),
    mf ? h("option", { value: "filter", selected: query.has("f") }, "A filter…") : null);
  const filterIn = h("textarea", {
    id: ids.f, rows: "2", spellcheck: "false", hidden: !query.has("f"), "aria-label": "Filter (JSON)",
    placeholder: mf ? `{"${mf}": {"$in": ["a", "b"]}}` : "{}", value: query.get("f") ?? "",
  });
  seriesSel.addEventListener("change", () => { filterIn.hidden = seriesSel.value !== "filter"; });
  const fieldSel = h("select", { id: ids.field, name: "field" },
    fields.map((f) => h("option", { value: f, selected: f === query.get("field") }, f)));
  const rangeSel = h("select", { id: ids.range, name: "range" },
    presets.map(([k, label]) => h("option", { value: k, selected: k === (query.get("range") ?? "all") }, label)));
  const fromIn = h("input", { id: ids.from, type: "datetime-local", step: "1" });
  const toIn = h("input", { id: ids.to, type: "datetime-local", step: "1" });
  if (query.get("from")) fromIn.value = toLocalInput(new Date(query.get("from")!));
  if (query.get("to")) toIn.value = toLocalInput(new Date(query.get("to")!));
  // From and To always show the range plotted; editing one makes the range custom.
  const custom = h("div", { class: "inline custom-range" },
    h("label", { for: ids.from }, "From"), fromIn,
    h("label", { for: ids.to }, "to"), toIn,
    h("span", { class: "muted small" }, `times in ${timeZone}; hover a time for UTC`));
  const winSel = h("select", { id: ids.w, name: "w" }, h("option", { value: "auto" }, "auto"),
    windows.map((w) => h("option", { value: String(w), selected: String(w) === query.get("w") }, fmtDuration(w))));
  const formErr = h("div", { role: "alert" });
  const lbl = (id: string, text: string) => h("label", { for: id }, text);
  const form = h("form", { class: "controls card", novalidate: true, "aria-label": "What to plot" },
    h("div", { class: "field" }, lbl(ids.c, "Collection"), collSel),
    h("div", { class: "field" }, lbl(ids.s, mf ? `Series (${mf})` : "Series"), seriesSel, filterIn),
    h("div", { class: "field" }, lbl(ids.field, "Field"), fieldSel),
    h("div", { class: "field" }, lbl(ids.range, "Time range"), rangeSel),
    h("div", { class: "field" }, lbl(ids.w, "Window"), winSel),
    h("div", { class: "field actions" }, h("button", { type: "submit", class: "primary" }, "Plot")),
    custom,
    formErr);

  // Results.
  const summary = h("p", { class: "summary muted", "aria-live": "polite" }, "\u00a0");
  const chartTab = h("button", { type: "button", role: "tab", id: "tab-chart", "aria-controls": "panel-chart", "aria-selected": "true" }, "Chart");
  const tableTab = h("button", { type: "button", role: "tab", id: "tab-table", "aria-controls": "panel-table", "aria-selected": "false", tabindex: "-1" }, "Table");
  const chartPanel = h("div", { id: "panel-chart", role: "tabpanel", "aria-labelledby": "tab-chart", class: "panel chart-panel" });
  const tablePanel = h("div", { id: "panel-table", role: "tabpanel", "aria-labelledby": "tab-table", class: "panel table-panel", hidden: true });
  const zoomOut = h("button", { type: "button", disabled: true }, "Zoom out");
  const resetZoom = h("button", { type: "button", disabled: true }, "Reset zoom");
  const csvBtn = h("button", { type: "button", disabled: true }, "Download CSV");
  const arrowBtn = h("button", { type: "button", disabled: true }, "Download Arrow");
  const tabs = h("div", { class: "toolbar" },
    h("div", { role: "tablist", "aria-label": "View", class: "tabs" }, chartTab, tableTab),
    h("div", { class: "actions" }, zoomOut, resetZoom, csvBtn, arrowBtn));
  const selectTab = (t: "chart" | "table") => {
    chartTab.setAttribute("aria-selected", String(t === "chart"));
    tableTab.setAttribute("aria-selected", String(t === "table"));
    chartTab.tabIndex = t === "chart" ? 0 : -1;
    tableTab.tabIndex = t === "table" ? 0 : -1;
    chartPanel.hidden = t !== "chart";
    tablePanel.hidden = t !== "table";
  };
  chartTab.addEventListener("click", () => selectTab("chart"));
  tableTab.addEventListener("click", () => selectTab("table"));
  for (const tab of [chartTab, tableTab]) {
    tab.addEventListener("keydown", (e) => {
      if (e.key !== "ArrowLeft" && e.key !== "ArrowRight") return;
      const other = tab === chartTab ? tableTab : chartTab;
      selectTab(other === chartTab ? "chart" : "table");
      other.focus();
    });
  }
  root.append(form, h("section", { class: "card results", "aria-label": "Result" }, tabs, summary, chartPanel, tablePanel));

  if (fields.length === 0) {
    clear(chartPanel, h("div", { class: "empty" }, h("p", null, `${c.name} has no numeric field yet: nothing to plot.`)));
    return;
  }

  let chart: Chart | null = null;
  signal.addEventListener("abort", () => chart?.destroy());
  const zoomStack: [Date, Date][] = [];
  let range: [Date, Date] | null = null;

  function seriesFilter(): Record<string, unknown> {
    if (seriesSel.value === "all") return {};
    if (seriesSel.value === "filter") {
      try {
        return JSON.parse(filterIn.value || "{}");
      } catch (e) {
        throw new Error(`The filter is not valid JSON: ${(e as Error).message}`);
      }
    }
    return { [mf!]: values[Number(seriesSel.value)] };
  }

  /** edge is the time of the first (dir 1) or last (-1) measurement of coll that filter matches. */
  async function edge(coll: string, filter: object, dir: 1 | -1): Promise<Date | null> {
    const rows = await send<Record<string, { $date: string }>[]>("POST", collPath(coll, "/find"),
      { filter, projection: { [ts.timeField]: 1 }, sort: { [ts.timeField]: dir }, limit: 1 }, signal);
    return rows.length ? new Date(rows[0][ts.timeField].$date) : null;
  }

  async function dataSpan(filter: object): Promise<[Date, Date] | null> {
    const [a, b] = await Promise.all([edge(c.name, filter, 1), edge(c.name, filter, -1)]);
    let span: [Date, Date] | null = a && b ? [a, new Date(b.getTime() + 1000)] : null;
    // All data includes what only a rollup of the field still holds
    // (the rollup's metaField and timeField are the collection's).
    const ru = chartRollup(rollups, fieldSel.value, Infinity);
    if (ru) {
      const [ra, rb] = await Promise.all([edge(ru.r.name, filter, 1), edge(ru.r.name, filter, -1)]);
      if (ra && rb) {
        const rEnd = new Date(rb.getTime() + ru.win * 1000);
        span = span ? [ra < span[0] ? ra : span[0], rEnd > span[1] ? rEnd : span[1]] : [ra, rEnd];
      }
    }
    return span;
  }

  async function resolveRange(filter: object): Promise<[Date, Date] | null> {
    const k = rangeSel.value;
    if (k === "all") return dataSpan(filter);
    if (k === "custom") {
      const a = new Date(fromIn.value), b = new Date(toIn.value);
      if (Number.isNaN(a.getTime()) || Number.isNaN(b.getTime()) || a >= b) throw new Error("Enter a custom range whose start is before its end.");
      return [a, b];
    }
    const secs = presets.find(([p]) => p === k)![2];
    const now = new Date();
    return [new Date(now.getTime() - secs * 1000), now];
  }

  function rangeFilter(filter: object, r: [Date, Date]): object {
    const tf = { [ts.timeField]: { $gte: { $date: r[0].toISOString() }, $lt: { $date: r[1].toISOString() } } };
    return Object.keys(filter).length ? { $and: [filter, tf] } : tf;
  }

  function request(filter: object, r: [Date, Date], w: number): object {
    return { filter: rangeFilter(filter, r), window: `${w}s`, groupBy: null, fields: [fieldSel.value], funcs: ["min", "avg", "max", "count"] };
  }

  interface Points { xs: number[]; mins: (number | null)[]; avgs: (number | null)[]; maxs: (number | null)[]; counts: number[] }

  /**
   * fromRollup reads field f of the rollup ru over r, per window of the
   * rollup's (or of the multiple of it nearest w from above), across the
   * series filter matches: min of the mins, max of the maxes, and the
   * average weighted by count when the rollup keeps sum and count (else
   * the mean of its averages).
   */
  async function fromRollup(ru: { r: Rollup; win: number }, filter: object, r: [Date, Date], w: number, f: string): Promise<Points & { weighted: boolean; per: number }> {
    const has = (fn: string) => ru.r.spec.funcs.includes(fn);
    const weighted = has("sum") && has("count");
    const per = ru.win * Math.max(1, Math.ceil(w / ru.win));
    const fields = ["avg", "min", "max", "sum", "count"].filter(has).map((fn) => `${f}_${fn}`);
    const rows = await send<Record<string, unknown>[]>("POST", collPath(ru.r.name, "/aggregate"),
      { filter: rangeFilter(filter, r), window: `${per}s`, groupBy: null, fields, funcs: ["min", "max", "avg", "sum"] }, signal);
    const p: Points = { xs: [], mins: [], avgs: [], maxs: [], counts: [] };
    const num = (v: unknown) => (typeof v === "number" ? v : null);
    for (const row of rows) {
      const avg = weighted
        ? (num(row[`${f}_count_sum`]) ? num(row[`${f}_sum_sum`])! / num(row[`${f}_count_sum`])! : null)
        : num(row[`${f}_avg_avg`]);
      if (avg === null) continue;
      p.xs.push(Date.parse(row[ts.timeField] as string) / 1000);
      p.avgs.push(avg);
      p.mins.push(num(row[`${f}_min_min`]));
      p.maxs.push(num(row[`${f}_max_max`]));
      p.counts.push(num(row[`${f}_count_sum`]) ?? 0);
    }
    return { ...p, weighted, per };
  }

  function saveState(): void {
    const q = new URLSearchParams({ c: c.name, field: fieldSel.value, range: rangeSel.value, w: winSel.value });
    if (seriesSel.value === "filter") q.set("f", filterIn.value);
    else if (seriesSel.value !== "all") q.set("s", JSON.stringify(values[Number(seriesSel.value)]));
    if (rangeSel.value === "custom" && range) { q.set("from", range[0].toISOString()); q.set("to", range[1].toISOString()); }
    history.replaceState(null, "", `#/explore?${q}`);
  }

  async function plot(): Promise<void> {
    formErr.replaceChildren();
    let filter: Record<string, unknown>;
    try {
      filter = seriesFilter();
      range = await resolve(filter);
    } catch (e) {
      clear(formErr, errorBox(e));
      return;
    }
    saveState();
    if (range) fillRange(range[0], range[1]);
    if (!range) {
      chart?.destroy();
      chart = null;
      summary.textContent = "\u00a0";
      clear(chartPanel, h("div", { class: "empty" }, h("p", null, "No measurements for this series.")));
      tablePanel.replaceChildren();
      return;
    }
    const span = (range[1].getTime() - range[0].getTime()) / 1000;
    const w = winSel.value === "auto" ? autoWindow(span) : Number(winSel.value);
    const f = fieldSel.value;
    // When the range begins before the oldest raw measurement the series
    // still has (or the raw data has none of it), the part before the end
    // of the rollup window holding that measurement comes from a rollup of
    // the field, if there is one: the rollup keeps what expiry removed
    // from the raw data. Its windows are whole: the first may begin before
    // the range.
    const ru = chartRollup(rollups, f, w);
    let cut = range[0];
    let older: (Points & { weighted: boolean; per: number }) | null = null;
    let rows: Record<string, unknown>[] = [];
    let req = request(filter, range, w);
    try {
      const oldest = ru ? await edge(c.name, filter, 1) : null;
      if (ru && (!oldest || oldest > range[0])) {
        const win = ru.win * 1000;
        const at = oldest ? Math.ceil(oldest.getTime() / win) * win : range[1].getTime();
        cut = new Date(Math.min(at, range[1].getTime()));
        older = await fromRollup(ru, filter, [new Date(Math.floor(range[0].getTime() / win) * win), cut], w, f);
        req = request(filter, [cut, range[1]], w);
      }
      if (cut < range[1]) rows = await (await call("POST", collPath(c.name, "/aggregate"), { body: req, signal })).json();
    } catch (e) {
      if (signal.aborted) return;
      clear(formErr, errorBox(e));
      return;
    }
    const xs: number[] = [], mins: (number | null)[] = [], avgs: (number | null)[] = [], maxs: (number | null)[] = [], counts: number[] = [];
    if (older) {
      xs.push(...older.xs); mins.push(...older.mins); avgs.push(...older.avgs); maxs.push(...older.maxs); counts.push(...older.counts);
    }
    for (const r of rows) {
      xs.push(Date.parse(r[ts.timeField] as string) / 1000);
      mins.push((r[`${f}_min`] as number | undefined) ?? null);
      avgs.push((r[`${f}_avg`] as number | undefined) ?? null);
      maxs.push((r[`${f}_max`] as number | undefined) ?? null);
      counts.push((r[`${f}_count`] as number | undefined) ?? 0);
    }
    const total = counts.reduce((a, b) => a + b, 0);
    const seriesName = seriesSel.value === "filter" ? filterIn.value.trim() || "{}" : seriesSel.selectedOptions[0]?.textContent ?? "";
    clear(summary,
      `${fieldSel.value} · ${seriesName} · ${fmtInt(total)} measurements in ${fmtInt(xs.length)} windows of ${fmtDuration(older && rows.length === 0 ? older.per : w)} · `,
      timeEl(range[0]), " → ", timeEl(range[1]));
    if (ru && older && older.xs.length > 0) {
      const how = [`from rollup ${ru.r.name}, ${ru.r.spec.window} windows`,
        older.per !== ru.win ? ` combined per ${fmtDuration(older.per)}` : "",
        older.weighted ? "" : " (average: the mean of the rollup's averages)"].join("");
      summary.append(h("span", { class: "rollup-note", "data-testid": "rollup-note" }, h("br"),
        cut < range[1] ? ["older than ", timeEl(cut), `: ${how}`] : `${how[0].toUpperCase()}${how.slice(1)}: the raw data holds none of this range`,
        "."));
    }
    // Downloads hold the raw part: the rollup is a collection of its own.
    for (const b of [csvBtn, arrowBtn]) b.disabled = rows.length === 0;
    zoomOut.disabled = false;
    resetZoom.disabled = zoomStack.length === 0;

    chart?.destroy();
    chart = null;
    if (xs.length === 0) {
      clear(chartPanel, h("div", { class: "empty" }, h("p", null, h("strong", null, "No measurements in this range.")),
        h("p", null, "Pick a wider range, or “All data”.")));
      clear(tablePanel, h("div", { class: "empty" }, h("p", null, "No rows.")));
      return;
    }
    chart = new Chart({
      height: 360,
      yLabel: f,
      series: [
        { label: "min", stroke: colors.edge, width: 1 },
        { label: "avg", stroke: colors.avg, width: 2 },
        { label: "max", stroke: colors.edge, width: 1 },
      ],
      bands: [[3, 1]],
      onSelect: (a, b) => {
        if (range) zoomStack.push(range);
        setCustom(new Date(a * 1000), new Date(b * 1000));
        void plot();
      },
    }, [xs, mins, avgs, maxs], `${f} of ${seriesName}: min, average and max per ${fmtDuration(w)} window`);
    chart.el.dataset.testid = "chart";
    clear(chartPanel, chart.el, h("p", { class: "help" }, "Drag across the chart to zoom in; the windows get finer as you zoom."));

    const shown = xs.slice(0, 2000);
    clear(tablePanel, h("div", { class: "table-scroll" }, h("table", { class: "data" },
      h("caption", { class: "sr-only" }, `${f} per window`),
      h("thead", null, h("tr", null, h("th", { scope: "col" }, "Window start"), h("th", { scope: "col", class: "num" }, "Count"),
        h("th", { scope: "col", class: "num" }, "Min"), h("th", { scope: "col", class: "num" }, "Avg"), h("th", { scope: "col", class: "num" }, "Max"))),
      h("tbody", null, shown.map((_r, i) => h("tr", null,
        h("td", null, timeEl(new Date(xs[i] * 1000))), h("td", { class: "num" }, fmtInt(counts[i])),
        h("td", { class: "num" }, fmtNum(mins[i])), h("td", { class: "num" }, fmtNum(avgs[i])), h("td", { class: "num" }, fmtNum(maxs[i]))))))),
    xs.length > shown.length ? h("p", { class: "help" }, `First ${fmtInt(shown.length)} of ${fmtInt(xs.length)} rows; download for all of them.`) : null);

    const base = `${c.name}-${f}`;
    csvBtn.onclick = () => void download(collPath(c.name, "/aggregate"), req, "text/csv", `${base}.csv`).catch((e) => clear(formErr, errorBox(e)));
    arrowBtn.onclick = () => void download(collPath(c.name, "/aggregate"), req, "application/vnd.apache.arrow.stream", `${base}.arrow`).catch((e) => clear(formErr, errorBox(e)));
  }

  function setCustom(a: Date, b: Date): void {
    rangeSel.value = "custom";
    fillRange(a, b);
  }
  function fillRange(a: Date, b: Date): void {
    fromIn.value = toLocalInput(a);
    toIn.value = toLocalInput(b);
    // datetime-local drops seconds' fractions; keep the exact range too.
    fromIn.dataset.exact = a.toISOString();
    toIn.dataset.exact = b.toISOString();
  }
  for (const el of [fromIn, toIn]) {
    el.addEventListener("input", () => {
      delete el.dataset.exact;
      rangeSel.value = "custom";
    });
  }
  // Custom ranges set by zooming keep their exact instants.
  const exact = (el: HTMLInputElement) => (el.dataset.exact ? new Date(el.dataset.exact) : new Date(el.value));
  async function resolve(filter: object): Promise<[Date, Date] | null> {
    if (rangeSel.value === "custom" && (fromIn.dataset.exact || toIn.dataset.exact)) return [exact(fromIn), exact(toIn)];
    return resolveRange(filter);
  }
  // The custom range from the URL is exact as well.
  if (query.get("from") && query.get("to")) setCustom(new Date(query.get("from")!), new Date(query.get("to")!));
  if (query.get("range") === "custom") rangeSel.value = "custom";
  else if (query.get("range")) rangeSel.value = query.get("range")!;

  zoomOut.addEventListener("click", () => {
    if (!range) return;
    const mid = (range[0].getTime() + range[1].getTime()) / 2, half = range[1].getTime() - range[0].getTime();
    zoomStack.push(range);
    setCustom(new Date(mid - half), new Date(mid + half));
    void plot();
  });
  resetZoom.addEventListener("click", () => {
    const first = zoomStack[0];
    zoomStack.length = 0;
    if (first) setCustom(first[0], first[1]);
    void plot();
  });
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    zoomStack.length = 0;
    void plot();
  });
  await plot();
}
