// Pieces shared by the pages.

import { APIError, hasToken } from "./api";
import { clear, h, type Child } from "./dom";
import { fmtBytes, fmtInt, fmtNum } from "./format";
import type { Collection } from "./model";

export function errorBox(e: unknown): HTMLElement {
  const msg = e instanceof APIError
    ? `${e.message} (${e.codeName || "error"} ${e.code || e.status})`
    : (e as Error).message ?? String(e);
  return h("div", { class: "notice error", role: "alert" }, h("strong", null, "Error: "), msg);
}

/**
 * outOfRange is the two delete filters that remove what suspends expiry (a
 * time-series delete takes one time range at a time).
 */
export function outOfRange(timeField: string): object[] {
  return [
    { [timeField]: { $lt: { $date: "1970-01-01T00:00:00Z" } } },
    { [timeField]: { $gt: { $date: "2038-01-19T03:14:07Z" } } },
  ];
}

/**
 * suspendedWarning explains a collection whose expiry is suspended by the
 * 1970-2038 rule, and what to do about it, or whose archive cannot be
 * written; null when neither.
 */
export function suspendedWarning(c: Collection, action?: HTMLElement): HTMLElement | null {
  const t = c.ttl;
  if (!t || !t.suspended) return null;
  if (t.outOfRangeBuckets === 0) {
    // The archive cannot be written: what would go there is kept.
    return h("div", { class: "notice warning", role: "status", "data-testid": "archive-suspended" },
      h("p", null, h("strong", null, "Archiving suspended. "),
        "The archive cannot be written, so the expired data of ", h("code", null, c.name),
        " that its rules move to the archive is kept, and the server retries on its own (with a growing wait, up to 5 minutes)."),
      t.reason ? h("p", { class: "muted small" }, `Server: ${t.reason}`) : null);
  }
  const tf = c.options.timeseries?.timeField ?? "timestamp";
  const auth = hasToken() ? ` -H "Authorization: Bearer $HOURGLASS_AUTH_TOKEN"` : "";
  const cmd = outOfRange(tf).map((f) => `curl${auth} ${location.origin}/v1/collections/${c.name}/delete -d '${JSON.stringify({ filter: f })}'`).join("\n");
  return h("div", { class: "notice warning", role: "status" },
    h("p", null, h("strong", null, "Expiry suspended. "),
      `${fmtInt(t.outOfRangeBuckets)} bucket${t.outOfRangeBuckets === 1 ? "" : "s"} of `, h("code", null, c.name),
      t.outOfRangeBuckets === 1 ? " holds" : " hold", " measurements outside 1970-01-01T00:00:00Z..2038-01-19T03:14:07Z, so nothing in this collection expires,",
      " not even in-range data, and reads return everything (MongoDB's 1970-2038 rule)."),
    h("p", null, "To resume expiry, delete the out-of-range measurements (or fix their timestamps and insert them again).",
      " Expiry resumes at once, without a restart:"),
    action ?? h("pre", null, h("code", null, cmd)),
    t.reason ? h("p", { class: "muted small" }, `Server: ${t.reason}`) : null);
}

/** bytesPerPoint is storage over count, "–" when either is unknown. */
export function bytesPerPoint(c: Collection): string {
  return c.count > 0 && c.storageBytes > 0 ? fmtNum(Number((c.storageBytes / c.count).toFixed(2))) : "–";
}

/** storageText shows a size, or says the data is not on disk yet. */
export function storageText(c: Collection): string {
  return c.storageBytes === 0 && c.count > 0 ? "in memory" : fmtBytes(c.storageBytes);
}

export function badge(text: string, kind = ""): HTMLElement {
  return h("span", { class: `badge ${kind}` }, text);
}

/** confirmBox shows a dry run (or what an action does) and waits for Confirm or Cancel. */
export function confirmBox(text: Child[], deletes: boolean, applyLabel: string, apply: () => Promise<void>, cancel: () => void, head = "Dry run"): HTMLElement {
  const status = h("div", { role: "alert" });
  const ok = h("button", { type: "button", class: deletes ? "danger" : "primary", "data-action": "confirm" }, applyLabel);
  const no = h("button", { type: "button", "data-action": "cancel", onclick: cancel }, "Cancel");
  ok.addEventListener("click", async () => {
    ok.disabled = no.disabled = true;
    try {
      await apply();
    } catch (e) {
      clear(status, errorBox(e));
      ok.disabled = no.disabled = false;
    }
  });
  const box = h("div", { class: `dry-run ${deletes ? "deletes" : ""}`, "data-testid": "dry-run", tabindex: "-1" },
    h("p", { class: "dry-run-head" }, head), h("p", null, text), h("div", { class: "actions" }, ok, no), status);
  queueMicrotask(() => ok.focus());
  return box;
}
