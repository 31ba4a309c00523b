// A small hyperscript helper: the console builds its DOM with h(), so
// that text is always set as text (never parsed as HTML).

export type Child = Node | string | number | null | undefined | false | Child[];

type Attrs = Record<string, unknown>;

const props = new Set(["value", "checked", "disabled", "hidden", "selected", "required", "readOnly", "open", "multiple", "indeterminate"]);

export function h<K extends keyof HTMLElementTagNameMap>(tag: K, attrs?: Attrs | null, ...children: Child[]): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  if (attrs) {
    for (const [k, v] of Object.entries(attrs)) {
      if (v === undefined || v === null || v === false && !props.has(k)) continue;
      if (k.startsWith("on") && typeof v === "function") {
        el.addEventListener(k.slice(2).toLowerCase(), v as EventListener);
      } else if (props.has(k)) {
        (el as unknown as Record<string, unknown>)[k] = v;
      } else if (k === "class") {
        el.className = String(v);
      } else {
        el.setAttribute(k, v === true ? "" : String(v));
      }
    }
  }
  append(el, children);
  return el;
}

export function append(el: Node, children: Child[]): void {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else if (c instanceof Node) el.appendChild(c);
    else el.appendChild(document.createTextNode(String(c)));
  }
}

export function clear(el: Element, ...children: Child[]): void {
  el.replaceChildren();
  append(el, children);
}

let ids = 0;
/** uid returns an id unique in the page, for label and aria links. */
export function uid(prefix: string): string {
  ids++;
  return `${prefix}-${ids}`;
}
