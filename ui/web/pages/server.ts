// The server: TTL monitor counters over time, ingest rate, operations in
// progress. Samples of /v1/status are kept while the console is open, so
// the charts go on where they were when the page is opened again.

import { getJSON } from "../api";
import { clear, h, type Child } from "../dom";
import { fmtBytes, fmtDuration, fmtInt, fmtNum, passSummary, timeEl } from "../format";
import { runTTLPass, type Op, type Status } from "../model";
import { Chart, colors } from "../chart";
import { errorBox } from "../widgets";

const every = 2000;
const keep = 450; // 15 minutes of samples

interface Sample { t: number; inserted: number; deleted: number; passes: number; subPasses: number; rate: number | null }
const samples: Sample[] = [];

function record(st: Status): void {
  const t = Date.now() / 1000;
  const inserted = st.metrics.document?.inserted ?? 0;
  const prev = samples[samples.length - 1];
  const rate = prev && t > prev.t && inserted >= prev.inserted ? (inserted - prev.inserted) / (t - prev.t) : null;
  samples.push({ t, inserted, deleted: st.metrics.ttl.deletedDocuments, passes: st.metrics.ttl.passes, subPasses: st.metrics.ttl.subPasses, rate });
  if (samples.length > keep) samples.splice(0, samples.length - keep);
}

export async function serverPage(root: HTMLElement, signal: AbortSignal): Promise<void> {
  const cards = h("dl", { class: "stats" });
  const passResult = h("p", { class: "muted", role: "status" });
  const passBtn = h("button", { type: "button", "data-action": "ttl-run" }, "Run a TTL pass now");
  const ops = h("div", { class: "ops" });
  const err = h("div", { role: "alert" });
  const ingestHost = h("div", { class: "chart-slot small" });
  const deletedHost = h("div", { class: "chart-slot small" });
  const passesHost = h("div", { class: "chart-slot small" });
  root.append(
    h("div", { class: "page-head" }, h("h1", null, "Server"),
      h("div", { class: "actions" }, passBtn)),
    passResult, err, cards,
    h("div", { class: "chart-grid" },
      h("section", { class: "card", "aria-labelledby": "ing-h" }, h("h2", { id: "ing-h" }, "Ingest rate ", h("span", { class: "muted small" }, "measurements/s")), ingestHost),
      h("section", { class: "card", "aria-labelledby": "del-h" }, h("h2", { id: "del-h" }, "TTL: deleted measurements ", h("span", { class: "muted small" }, "since start")), deletedHost),
      h("section", { class: "card", "aria-labelledby": "pass-h" }, h("h2", { id: "pass-h" }, "TTL: passes and sub-passes ", h("span", { class: "muted small" }, "since start")), passesHost)),
    h("section", { class: "card", "aria-labelledby": "ops-h" }, h("h2", { id: "ops-h" }, "Current operations"), ops));

  passBtn.addEventListener("click", async () => {
    passBtn.disabled = true;
    try {
      const r = await runTTLPass();
      passResult.textContent = passSummary(r);
      await tick();
    } catch (e) {
      clear(err, errorBox(e));
    } finally {
      passBtn.disabled = false;
    }
  });

  const charts: Chart[] = [];
  signal.addEventListener("abort", () => charts.forEach((c) => c.destroy()));
  const mk = (host: HTMLElement, series: { label: string; stroke: string }[], label: string, integer = true) => {
    const c = new Chart({ height: 180, series, xSpan: 60, integer }, [[], ...series.map(() => [])], label);
    host.append(c.el);
    charts.push(c);
    return c;
  };
  const ingest = mk(ingestHost, [{ label: "measurements/s", stroke: colors.avg }], "Ingest rate, measurements per second", false);
  const deleted = mk(deletedHost, [{ label: "deleted", stroke: colors.second }], "Measurements deleted by the TTL monitor since the server started");
  const passes = mk(passesHost, [{ label: "passes", stroke: colors.avg }, { label: "sub-passes", stroke: colors.third }], "TTL passes and sub-passes since the server started");

  async function tick(): Promise<void> {
    const [st, cur] = await Promise.all([getJSON<Status>("/v1/status", signal), getJSON<{ inprog: Op[] }>("/v1/currentop", signal)]);
    record(st);
    err.replaceChildren();
    const stat = (label: string, ...value: Child[]) => h("div", { class: "stat" }, h("dt", null, label), h("dd", null, value));
    const last = samples[samples.length - 1];
    clear(cards,
      stat("Version", st.version),
      stat("Up for", fmtDuration(st.uptime)),
      stat("Memory", st.mem?.resident !== undefined ? `${fmtInt(st.mem.resident)} MiB` : "–"),
      stat("Collections", fmtInt(st.storageEngine?.collections)),
      stat("Measurements", fmtInt(st.storageEngine?.measurements)),
      stat("Storage", fmtBytes(st.storageEngine?.storageBytes)),
      stat("Ingest now", last.rate === null ? "–" : `${fmtNum(Math.round(last.rate))}/s`),
      stat("Ingest slots busy", st.ingest ? `${st.ingest.inProgress}/${st.ingest.slots}` : "–",
        st.ingest ? h("span", { class: "muted small" }, ` ${fmtInt(st.ingest.queued)} queued`) : null),
      stat("TTL passes", `${fmtInt(st.metrics.ttl.passes)} (${fmtInt(st.metrics.ttl.subPasses)} sub)`),
      stat("TTL deleted", fmtInt(st.metrics.ttl.deletedDocuments)));
    const ts = samples.map((s) => s.t);
    ingest.plot.setData([ts, samples.map((s) => s.rate)]);
    deleted.plot.setData([ts, samples.map((s) => s.deleted)]);
    passes.plot.setData([ts, samples.map((s) => s.passes), samples.map((s) => s.subPasses)]);
    const list = cur.inprog;
    if (list.length === 0) {
      clear(ops, h("p", { class: "muted" }, "No operation in progress."));
    } else {
      clear(ops, h("table", { class: "data" },
        h("thead", null, h("tr", null, ["opid", "op", "namespace", "what", "client", "running", "documents"].map((x) => h("th", { scope: "col" }, x)))),
        h("tbody", null, list.map((o) => h("tr", null,
          h("td", null, String(o.opid)), h("td", null, o.op), h("td", null, o.ns ?? "–"), h("td", null, o.desc ?? "–"),
          h("td", null, o.client ?? "–"), h("td", { class: "num" }, `${fmtNum((o.microsecs_running ?? 0) / 1e6)} s`),
          h("td", { class: "num" }, fmtInt(o.documentsHandled)))))));
    }
    ops.append(h("p", { class: "help" }, "Updated ", timeEl(new Date()), `, every ${every / 1000} s.`));
  }

  await tick();
  const timer = setInterval(() => {
    tick().catch((e) => { if (!signal.aborted) clear(err, errorBox(e)); });
  }, every);
  signal.addEventListener("abort", () => clearInterval(timer));
}
