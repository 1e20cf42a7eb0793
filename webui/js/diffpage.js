// The /diff/<a>/<b> page: two stored traces compared kernel by kernel. `b` may be the word
// `inductor`: then B is TorchInductor's own output code and times from trace a (its
// `inductor` event).

import { getDiff, getTrace } from "./api.js";
import { Trace, inductorOf } from "./trace.js";
import { inductorKernels, oursKernels } from "./diff.js";
import { notFound } from "./layout.js";
import { DiffPane } from "./panes/diff.js";

async function load(id) {
  const stored = await getTrace(id);
  const trace = new Trace();
  for (const event of stored.events ?? []) trace.add(event);
  return trace;
}

export async function openDiff(a, b, ctx) {
  document.body.classList.add("diff-mode");
  for (const id of ["compile", "share", "samples"]) document.getElementById(id).hidden = true;
  /** @type {HTMLElement} */ (document.querySelector(".options")).hidden = true;
  let left, right;
  try {
    left = await load(a);
    right = b === "inductor" ? left : await load(b);
  } catch (err) {
    if (err.status === 404) return notFound(`No stored trace has the id “${err.id ?? (left ? b : a)}”.`);
    throw err;
  }
  if (b === "inductor" && !inductorOf(left)) {
    return notFound(`Trace ${a} has no Inductor output code (compile it with “compare with Inductor” on).`);
  }
  const { groups } = await getDiff(a, b);
  const pane = new DiffPane(ctx);
  pane.el.dataset.pane = "diff";
  document.getElementById("permalink-info").textContent =
    `Diff of ${a} and ${b === "inductor" ? "Inductor's output code" : b}`;
  document.querySelector(".workspace").replaceWith(pane.el);
  pane.show(
    { label: `A · trace ${a}`, href: `/t/${a}`, trace: left, kernels: oursKernels(left) },
    b === "inductor"
      ? { label: "B · TorchInductor", trace: left, kernels: inductorKernels(left), inductor: true }
      : { label: `B · trace ${b}`, href: `/t/${b}`, trace: right, kernels: oursKernels(right) },
    groups);
  window.kernelscope = { ...(window.kernelscope ?? {}), diff: pane };
  return pane;
}
