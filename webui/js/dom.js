// Small DOM and formatting helpers shared by every pane.

// h("div.card.hl", {title: "x", onclick}, child, [children], "text") builds an element.
export function h(tag, attrs, ...children) {
  const [name, ...classes] = tag.split(".");
  const el = name === "svg" || SVG_TAGS.has(name)
    ? document.createElementNS("http://www.w3.org/2000/svg", name)
    : document.createElement(name || "div");
  if (classes.length) el.setAttribute("class", classes.join(" "));
  const isChild = typeof attrs !== "object" || attrs instanceof Node || Array.isArray(attrs);
  if (attrs !== null && attrs !== undefined && isChild) {
    children.unshift(attrs);
    attrs = null;
  }
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else if (key === "style" && typeof value === "object") {
      for (const [prop, v] of Object.entries(value)) el.style.setProperty(prop, v);
    }
    else if (key === "dataset") Object.assign(el.dataset, value);
    else if (key === "html") el.innerHTML = value;
    else el.setAttribute(key, value === true ? "" : value);
  }
  append(el, children);
  return el;
}

const SVG_TAGS = new Set(["g", "rect", "line", "path", "text", "title", "circle", "tspan"]);

function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
}

export function clear(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

export function escapeHtml(text) {
  return String(text).replace(/[&<>"']/g, (c) => ESC[c]);
}
const ESC = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

export function fmtMs(ms) {
  if (ms === null || ms === undefined) return "–";
  if (ms >= 1000) return `${(ms / 1000).toFixed(2)} s`;
  if (ms >= 10) return `${ms.toFixed(0)} ms`;
  if (ms >= 1) return `${ms.toFixed(1)} ms`;
  if (ms >= 0.01) return `${ms.toFixed(3)} ms`;
  return `${(ms * 1000).toFixed(1)} µs`;
}

export function fmtBytes(n) {
  if (n === null || n === undefined) return "–";
  const units = ["B", "KiB", "MiB", "GiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return `${i === 0 ? n : n.toFixed(n >= 100 ? 0 : 1)} ${units[i]}`;
}

export function fmtNum(x, digits = 3) {
  if (x === null || x === undefined) return "–";
  if (x === 0) return "0";
  if (Math.abs(x) < 1e-3 || Math.abs(x) >= 1e6) return x.toExponential(2);
  return Number(x.toPrecision(digits)).toString();
}

export const plural = (n, word) => `${n} ${word}${n === 1 ? "" : "s"}`;

export const shape = (s) => (s ? `[${s.join(", ")}]` : "–");

// A placeholder shown in a pane until its stage arrives.
export function empty(text) {
  return h("div.empty", text);
}

export function badge(text, kind = "") {
  return h(`span.badge${kind ? "." + kind : ""}`, text);
}

// A long list drawn as it is read: `make(item)` for the first `first` items (`chunk` unless
// said) into `parent`, then a row saying how many are left (`more(n)`), replaced by the
// next `chunk` when it comes near the view (a list in a closed <details> waits for its
// opening); `drawn()` runs after each later chunk (a pane marks its selection). A given
// `control` gets `all()`, which draws the rest at once (a selection past the drawn items).
/**
 * @template T
 * @param {Element} parent @param {T[]} items @param {(item: T) => Element} make
 * @param {(left: number) => Element} more
 * @param {{ chunk?: number, first?: number, drawn?: () => void, control?: { all?: () => void } }} [options]
 */
export function growing(parent, items, make, more, { chunk = 60, first = chunk,
  drawn = () => {}, control = {} } = {}) {
  let at = 0;
  let waiting = null; // { sentinel, seen } while items are left
  const append = (end) => {
    parent.append(...items.slice(at, end).map(make));
    at = end;
  };
  const step = (count = chunk) => {
    append(Math.min(items.length, at + count));
    if (at >= items.length || typeof IntersectionObserver !== "function") {
      if (at < items.length) step();
      return;
    }
    const sentinel = more(items.length - at);
    parent.append(sentinel);
    const seen = new IntersectionObserver((entries) => {
      if (!entries.some((e) => e.isIntersecting)) return;
      stop();
      step();
      drawn();
    }, { rootMargin: "600px 0px" });
    seen.observe(sentinel);
    waiting = { sentinel, seen };
  };
  const stop = () => {
    waiting?.seen.disconnect();
    waiting?.sentinel.remove();
    waiting = null;
  };
  control.all = () => {
    if (at >= items.length) return;
    stop();
    append(items.length);
    drawn();
  };
  step(first);
  return parent;
}

// Resolves in a task of its own: what follows does not lengthen the task that awaits it.
export function nextTask() {
  return new Promise((resolve) => setTimeout(resolve, 0));
}

// Resolves once the next frame is drawn (or after `ms` on a page that draws none, a hidden
// one): what follows runs in a task of its own, after what came before has painted.
export function afterFrame(ms = 250) {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    requestAnimationFrame(() => setTimeout(() => { clearTimeout(timer); resolve(); }, 0));
  });
}

// `placeholder` until it comes near the view, then what `build()` makes in its place, and
// `done()` after (at once where there is no IntersectionObserver).
export function whenNear(placeholder, build, done = () => {}) {
  if (typeof IntersectionObserver !== "function") {
    queueMicrotask(done);
    return build();
  }
  const seen = new IntersectionObserver((entries) => {
    if (!entries.some((e) => e.isIntersecting)) return;
    seen.disconnect();
    placeholder.replaceWith(build());
    done();
  }, { rootMargin: "600px 0px" });
  seen.observe(placeholder);
  return placeholder;
}
