// Time-series charts with uPlot: times on the axis in the user's zone, a
// read-out of the cursor with the UTC instant, and resizing with the page.

import uPlot from "uplot";
import "uplot/dist/uPlot.min.css";
import { h } from "./dom";
import { fmtNum, localString, utcString } from "./format";

export const colors = {
  avg: "#1f5fd6",
  band: "rgba(31, 95, 214, 0.16)",
  edge: "rgba(31, 95, 214, 0.55)",
  second: "#c2410c",
  third: "#15803d",
};

export interface ChartSpec {
  series: { label: string; stroke: string; width?: number; dash?: number[] }[];
  bands?: [number, number][];
  bandFill?: string;
  height: number;
  /** onSelect receives the selected range (seconds) when the user drags; the chart does not zoom by itself then. */
  onSelect?: (min: number, max: number) => void;
  yLabel?: string;
  /** integer: the y axis has whole-number ticks only (counters). */
  integer?: boolean;
  /** xSpan, in seconds, is the least span the x axis shows, ending at the last point. */
  xSpan?: number;
}

/** Chart is a uPlot in a container that follows the container's width. */
export class Chart {
  readonly el: HTMLElement;
  readonly plot: uPlot;
  private readonly readout: HTMLElement;
  private readonly ro: ResizeObserver;

  constructor(spec: ChartSpec, data: uPlot.AlignedData, label: string) {
    const host = h("div", { class: "chart-host" });
    this.readout = h("p", { class: "readout muted small", "aria-live": "off" }, "Hover over the chart for values; times in UTC appear here.");
    this.el = h("figure", { class: "chart", "aria-label": label }, host, this.readout);
    const opts: uPlot.Options = {
      width: 600,
      height: spec.height,
      legend: { show: true, live: true },
      cursor: { drag: { x: true, y: false, setScale: !spec.onSelect }, focus: { prox: 16 } },
      scales: {
        x: spec.xSpan
          ? {
            time: true,
            // From the data itself: uPlot widens a single point to 1000 days.
            range: (u) => {
              const xs = u.data[0];
              const last = xs.length ? xs[xs.length - 1] : Date.now() / 1000;
              const first = xs.length ? xs[0] : last;
              return [Math.min(first, last - spec.xSpan!), last];
            },
          }
          : { time: true },
        y: { range: (_u, min, max) => (min === null || max === null || min === max ? [Math.min(0, min ?? 0), Math.max(1, (max ?? 0) * 1.2)] : uPlot.rangeNum(min, max, 0.1, true)) as uPlot.Range.MinMax },
      },
      axes: [
        { stroke: "#4b5563", grid: { stroke: "#e5e7eb" }, ticks: { stroke: "#d1d5db" } },
        { stroke: "#4b5563", grid: { stroke: "#e5e7eb" }, ticks: { stroke: "#d1d5db" }, size: 60, label: spec.yLabel, values: (_u, vals) => vals.map((v) => fmtNum(v)),
          incrs: spec.integer ? [1, 2, 5, 10, 20, 50, 100, 200, 500, 1e3, 2e3, 5e3, 1e4, 2e4, 5e4, 1e5, 2e5, 5e5, 1e6, 2e6, 5e6, 1e7, 1e8, 1e9, 1e10] : undefined },
      ],
      series: [
        { label: "Time", value: (_u, v) => (v === null ? "–" : localString(new Date(v * 1000))) },
        ...spec.series.map((s) => ({ label: s.label, stroke: s.stroke, width: s.width ?? 1.5, dash: s.dash, spanGaps: false, value: (_u: uPlot, v: number | null) => fmtNum(v) })),
      ],
      bands: (spec.bands ?? []).map(([a, b]) => ({ series: [a, b] as [number, number], fill: spec.bandFill ?? colors.band })),
      hooks: {
        setCursor: [(u) => {
          const i = u.cursor.idx;
          if (i === null || i === undefined) return;
          const t = u.data[0][i];
          if (t === undefined || t === null) return;
          const d = new Date(t * 1000);
          this.readout.textContent = `${localString(d)} · ${utcString(d)}`;
        }],
        setSelect: [(u) => {
          if (!spec.onSelect || u.select.width < 2) return;
          const min = u.posToVal(u.select.left, "x");
          const max = u.posToVal(u.select.left + u.select.width, "x");
          u.setSelect({ left: 0, top: 0, width: 0, height: 0 }, false);
          spec.onSelect(min, max);
        }],
      },
    };
    this.plot = new uPlot(opts, data, host);
    this.ro = new ResizeObserver(() => {
      const w = Math.max(300, Math.floor(host.clientWidth));
      if (w !== this.plot.width) this.plot.setSize({ width: w, height: spec.height });
    });
    this.ro.observe(host);
  }

  destroy(): void {
    this.ro.disconnect();
    this.plot.destroy();
  }
}
