// Number, size, duration and time formatting. Times are shown in the
// user's time zone; the UTC instant is in the title (shown on hover).

import { h } from "./dom";

const intFmt = new Intl.NumberFormat();
const numFmt = new Intl.NumberFormat(undefined, { maximumSignificantDigits: 6 });
const localFmt = new Intl.DateTimeFormat(undefined, {
  year: "numeric", month: "short", day: "numeric",
  hour: "2-digit", minute: "2-digit", second: "2-digit",
});

export const timeZone = Intl.DateTimeFormat().resolvedOptions().timeZone || "local time";

export function fmtInt(n: number | null | undefined): string {
  return n === null || n === undefined ? "–" : intFmt.format(n);
}

export function fmtNum(n: number | null | undefined): string {
  return n === null || n === undefined || Number.isNaN(n) ? "–" : numFmt.format(n);
}

export function fmtBytes(n: number | null | undefined): string {
  if (n === null || n === undefined) return "–";
  if (n < 1024) return `${intFmt.format(n)} B`;
  const units = ["KiB", "MiB", "GiB", "TiB"];
  let v = n / 1024;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
  return `${v.toFixed(v < 10 ? 1 : 0)} ${units[i]}`;
}

/** fmtDuration writes seconds as the largest units that are exact, e.g. "1 d 6 h". */
export function fmtDuration(sec: number): string {
  if (sec === 0) return "0 s";
  const units: [number, string][] = [[86400, "d"], [3600, "h"], [60, "min"], [1, "s"]];
  const parts: string[] = [];
  let rest = sec;
  for (const [n, u] of units) {
    if (rest >= n) {
      parts.push(`${intFmt.format(Math.floor(rest / n))} ${u}`);
      rest %= n;
    }
    if (parts.length === 2) break;
  }
  return parts.join(" ") + (rest > 0 ? " …" : "");
}

/** utcString is an instant as "2024-05-01 12:00:00 UTC". */
export function utcString(d: Date): string {
  return d.toISOString().replace("T", " ").replace(/\.000Z$|Z$/, "").replace(/(\.\d+)$/, "$1") + " UTC";
}

export function localString(d: Date): string {
  return localFmt.format(d);
}

/** timeEl is a <time> showing d in the user's zone, with UTC on hover. */
export function timeEl(d: Date | null): HTMLElement {
  if (!d) return h("span", { class: "muted" }, "–");
  return h("time", { datetime: d.toISOString(), title: utcString(d) }, localString(d));
}

/** dateOf reads an Extended JSON date, an RFC 3339 string or null. */
export function dateOf(v: unknown): Date | null {
  if (v === null || v === undefined) return null;
  if (typeof v === "string") return new Date(v);
  if (typeof v === "object" && "$date" in (v as object)) {
    const d = (v as { $date: unknown }).$date;
    if (typeof d === "string") return new Date(d);
    if (d && typeof d === "object" && "$numberLong" in d) return new Date(Number((d as { $numberLong: string }).$numberLong));
  }
  return null;
}

/** json writes a value compactly, for filters and meta values. */
export function json(v: unknown): string {
  return JSON.stringify(v);
}

/** count writes "1 bucket", "2 buckets" (plural: the word with an s unless given). */
export function count(n: number, word: string, plural = `${word}s`): string {
  return `${fmtInt(n)} ${n === 1 ? word : plural}`;
}

/** passSummary describes the reply of POST /v1/admin/ttl/run. */
export function passSummary(r: { deletedDocuments: number; deletedBuckets: number; subPasses: number; tookMillis: number }): string {
  return `TTL pass done: deleted ${count(r.deletedDocuments, "measurement")} in ${count(r.deletedBuckets, "bucket")} (${count(r.subPasses, "sub-pass", "sub-passes")}, ${fmtInt(r.tookMillis)} ms).`;
}
