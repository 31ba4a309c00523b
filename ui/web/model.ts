// The shapes of the API replies the console reads (docs/api.md).

import { call, collPath, getJSON, send } from "./api";

export type DateJSON = { $date: string } | null;

export interface TTLIndex {
  name: string;
  expireAfterSeconds: number;
  partialFilterExpression?: Record<string, unknown>;
}

export interface TTLState {
  expireAfterSeconds: number | null;
  indexes: TTLIndex[];
  suspended: boolean;
  reason: string | null;
  outOfRangeBuckets: number;
  nextExpiry: DateJSON;
}

export interface TimeseriesOptions {
  timeField: string;
  metaField?: string;
  granularity?: string;
  bucketMaxSpanSeconds?: number;
  bucketRoundingSeconds?: number;
}

/** RollupSpec is what a rollup keeps (docs/rollups.md). */
export interface RollupSpec {
  source: string;
  window: string;
  fields: string[];
  funcs: string[];
  partialFilterExpression?: Record<string, unknown>;
}

/** Rollup is one entry of GET /v1/collections/{name}/rollups. */
export interface Rollup {
  name: string;
  spec: RollupSpec;
  expireAfterSeconds?: number;
  watermark: string;
  lagSeconds: number;
  pendingSeries: number;
  lastError?: string;
}

export interface Collection {
  name: string;
  type: string;
  options: {
    timeseries?: TimeseriesOptions; expireAfterSeconds?: number; capped?: boolean; size?: number; max?: number;
    rollupOf?: RollupSpec; archive?: boolean;
  };
  count: number;
  buckets?: number;
  storageBytes: number;
  fields?: Record<string, string[]>;
  created?: string;
  ttl?: TTLState;
  /** What archive passes moved out (docs/archive.md). */
  archive?: { files: number; bytes: number; measurements: number };
}

export interface IndexSpec {
  v: number;
  key: Record<string, number>;
  name: string;
  expireAfterSeconds?: number;
  partialFilterExpression?: Record<string, unknown>;
}

export interface PreviewRule {
  index: string | null;
  expireAfterSeconds: number;
  buckets: number;
  measurements: number;
  hiddenMeasurements: number;
}

export interface Preview {
  now: string;
  suspended: boolean;
  rules: PreviewRule[];
}

export interface TTLRun {
  deletedDocuments: number;
  deletedBuckets: number;
  subPasses: number;
  tookMillis: number;
}

export interface Status {
  host: string;
  version: string;
  pid: number;
  uptime: number;
  localTime: DateJSON;
  mem?: { resident?: number; residentPeak?: number; heapBytes?: number };
  ingest?: { inProgress: number; queued: number; slots: number; queueLimit: number };
  opcounters?: Record<string, number>;
  storageEngine?: { collections: number; measurements: number; buckets: number; storageBytes: number };
  metrics: {
    document?: { inserted: number; deleted: number; returned: number };
    ttl: { deletedDocuments: number; deletedBuckets?: number; passes: number; subPasses: number };
  };
}

export interface Op {
  opid: number;
  op: string;
  ns?: string;
  desc?: string;
  client?: string;
  secs_running?: number;
  microsecs_running?: number;
  documentsHandled?: number;
}

export function describe(name: string, signal?: AbortSignal): Promise<Collection> {
  return getJSON<Collection>(collPath(name), signal);
}

export function listCollections(signal?: AbortSignal): Promise<Collection[]> {
  return getJSON<Collection[]>("/v1/collections", signal);
}

export function listRollups(name: string, signal?: AbortSignal): Promise<Rollup[]> {
  return getJSON<Rollup[]>(collPath(name, "/rollups"), signal);
}

/** rollupFuncs are the functions a rollup can keep, in the API's order. */
export const rollupFuncs = ["count", "sum", "avg", "min", "max", "first", "last"];

/**
 * windowSeconds reads a rollup window as the API writes it ("90s", "15m",
 * "1h", "1d", "1w", or a Go duration such as "1h30m"); NaN when it cannot.
 */
export function windowSeconds(w: string): number {
  const unit: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86400, w: 7 * 86400 };
  const parts = w.match(/\d+(\.\d+)?[smhdw]/g);
  if (!parts || parts.join("") !== w) return NaN;
  return parts.reduce((t, p) => t + Number(p.slice(0, -1)) * unit[p.slice(-1)], 0);
}

export function runTTLPass(): Promise<TTLRun> {
  return send<TTLRun>("POST", "/v1/admin/ttl/run", {});
}

/** numericFields lists the fields that can be aggregated. */
export function numericFields(c: Collection): string[] {
  return Object.entries(c.fields ?? {})
    .filter(([, types]) => types.some((t) => t === "double" || t === "long" || t === "int"))
    .map(([f]) => f)
    .sort();
}

/** ttlSummary is one line on a collection's rules, for the list. */
export function ttlSummary(c: Collection, fmt: (s: number) => string): string {
  const t = c.ttl;
  if (!t) return c.type === "timeseries" ? "–" : "no expiry rules";
  const parts: string[] = [];
  parts.push(t.expireAfterSeconds === null ? "kept for ever" : `${fmt(t.expireAfterSeconds)} for every series`);
  if (t.indexes.length > 0) {
    const shortest = Math.min(...t.indexes.map((i) => i.expireAfterSeconds));
    parts.push(`${t.indexes.length} per-sensor rule${t.indexes.length > 1 ? "s" : ""} (shortest ${fmt(shortest)})`);
  }
  return parts.join("; ");
}

/**
 * metaValues lists the distinct meta values of a time-series collection
 * (at most limit), from a one-window aggregate grouped by the meta field.
 */
export async function metaValues(c: Collection, limit = 1000, signal?: AbortSignal): Promise<unknown[]> {
  const mf = c.options.timeseries?.metaField;
  const fields = numericFields(c);
  if (!mf || fields.length === 0) return [];
  const rows = await send<Record<string, unknown>[]>("POST", collPath(c.name, "/aggregate"),
    { window: "36500d", groupBy: mf, fields: [fields[0]], funcs: ["count"] }, signal);
  const seen = new Map<string, unknown>();
  for (const r of rows) {
    if (!(mf in r)) continue;
    const k = JSON.stringify(r[mf]);
    if (!seen.has(k)) seen.set(k, r[mf]);
    if (seen.size >= limit) break;
  }
  return [...seen.entries()].sort(([a], [b]) => a.localeCompare(b)).map(([, v]) => v);
}

/** metaLabel shows a meta value: a string bare, anything else as JSON. */
export function metaLabel(v: unknown): string {
  return typeof v === "string" ? v : JSON.stringify(v);
}

/** countFind counts the measurements a find filter matches, streaming the reply. */
export async function countFind(c: Collection, filter: unknown, signal?: AbortSignal): Promise<number> {
  const tf = c.options.timeseries?.timeField ?? "_id";
  const r = await call("POST", collPath(c.name, "/find"), {
    body: { filter, projection: { [tf]: 1 } }, accept: "application/x-ndjson", signal,
  });
  const reader = r.body!.getReader();
  let n = 0;
  let last = 10;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    for (const b of value) if (b === 10) n++;
    if (value.length > 0) last = value[value.length - 1];
  }
  return last === 10 ? n : n + 1;
}

export function preview(name: string, body: Record<string, unknown>): Promise<Preview> {
  return send<Preview>("POST", collPath(name, "/ttl/preview"), body);
}
