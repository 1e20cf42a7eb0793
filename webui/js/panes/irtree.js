// Draws an IR expression tree (lowering buffers[].tree) as an SVG: each node a box with its
// op, leaves showing what they load or the constant, lines to the children. A tidy layout:
// leaves left to right, each parent centred over its children.

import { h } from "../dom.js";

const CHAR_W = 6.6;
const BOX_H = 22;
const GAP_X = 8;
const LEVEL_H = 42;

// Loads (blue) show only their buffer (the index is in the tooltip and the card's reads table)
// and constants at most 6 significant digits, to keep wide trees on screen.
function label(node) {
  switch (node.op) {
    case "load": return node.buffer;
    case "constant": return typeof node.value === "number" && !Number.isInteger(node.value)
      ? String(Number(node.value.toPrecision(6))) : String(node.value);
    case "index_expr": return `index ${node.expr}`;
    default: return node.op;
  }
}

function tooltip(t) {
  const n = t.node;
  const what = n.op === "load" ? `load ${n.buffer}[${n.index}]`
    : n.op === "constant" ? `constant ${n.value}` : n.op === "index_expr" ? `index ${n.expr}` : n.op;
  return n.origin ? `${what}  ← FX node ${n.origin}` : what;
}

function category(node) {
  if (node.op === "load") return "load";
  if (node.op === "constant") return "const";
  if (node.op === "index_expr") return "index";
  return "op";
}

// Adds w (own box), span (subtree width), depth; returns the laid-out copy.
function measure(node, depth = 0) {
  const text = label(node);
  const kids = (node.args ?? []).filter((a) => a && typeof a === "object" && a.op)
    .map((a) => measure(a, depth + 1));
  const w = Math.max(text.length * CHAR_W + 14, 28);
  const kidsSpan = kids.reduce((s, k) => s + k.span, 0) + GAP_X * Math.max(kids.length - 1, 0);
  return { node, text, kids, w, span: Math.max(w, kidsSpan), depth };
}

function place(t, left) {
  const kidsSpan = t.kids.reduce((s, k) => s + k.span, 0) + GAP_X * Math.max(t.kids.length - 1, 0);
  let x = left + (t.span - kidsSpan) / 2;
  for (const k of t.kids) {
    place(k, x);
    x += k.span + GAP_X;
  }
  t.cx = t.kids.length
    ? (t.kids[0].cx + t.kids[t.kids.length - 1].cx) / 2
    : left + t.span / 2;
  t.y = t.depth * LEVEL_H + 4;
}

function flatten(t, out = []) {
  out.push(t);
  t.kids.forEach((k) => flatten(k, out));
  return out;
}

// `onNode(origin)` is called on hover with the tree node's FX origin (or null).
/**
 * @param {any} tree
 * @param {(origin: string | null) => void} [onHover]
 * @param {(origin: string | null) => void} [onClick]
 */
export function treeSvg(tree, onHover = () => {}, onClick = () => {}) {
  const root = measure(tree);
  place(root, 4);
  const all = flatten(root);
  const width = root.span + 8;
  const height = Math.max(...all.map((t) => t.y)) + BOX_H + 6;
  const edges = all.flatMap((t) => t.kids.map((k) =>
    h("path.edge", { d: `M${t.cx},${t.y + BOX_H} C${t.cx},${t.y + BOX_H + 12} ${k.cx},${k.y - 12} ${k.cx},${k.y}` })));
  const nodes = all.map((t) => {
    const g = h(`g.tn.${category(t.node)}`, { dataset: { origin: t.node.origin ?? "" } },
      h("title", tooltip(t)),
      h("rect", { x: t.cx - t.w / 2, y: t.y, width: t.w, height: BOX_H, rx: 5 }),
      h("text", { x: t.cx, y: t.y + BOX_H / 2 + 4, "text-anchor": "middle" }, t.text));
    g.addEventListener("mouseenter", () => onHover(t.node.origin ?? null));
    g.addEventListener("mouseleave", () => onHover(null));
    g.addEventListener("click", (e) => { e.stopPropagation(); onClick(t.node.origin ?? null); });
    return g;
  });
  return h("svg.tree", { width, height, viewBox: `0 0 ${width} ${height}` }, edges, nodes);
}
