// The /diff/<a>/<b> page: two stored traces compared kernel by kernel. `b` may be the word
// `inductor`: then B is TorchInductor's own output code and times from trace a (its
// `inductor` event).

import { getDiff, getWholeTrace } from "./api.js";
import { Trace, inductorOf } from "./trace.js";
import { inductorKernels, oursKernels } from "./diff.js";
import { notFound } from "./layout.js";
import { DiffPane } from "./panes/diff.js";

async function load(id) {
  const stored = await getWholeTrace(id);
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
  const answer = await getDiff(a, b);
  const { groups } = answer;
  if (answer.inductor) return showLogged(a, b, left, answer, ctx);
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

// A rebuilt graph (trace a) against Inductor's kernels for it as the log (trace b) holds
// them: the server matched them by FX node and renamed Inductor's nodes to ours
// (compiler/trace/rebuild.py), so B is trace a's own graph with that `inductor` event.
function showLogged(a, b, left, answer, ctx) {
  const right = new Trace();
  for (const event of left.events) right.add(event);
  const seq = Math.max(0, ...left.events.map((e) => e.seq)) + 1;
  right.add({ schema: 1, seq, stage: "inductor", ms: 0, data: answer.inductor });
  const pane = new DiffPane(ctx);
  pane.el.dataset.pane = "diff";
  document.getElementById("permalink-info").textContent =
    `Diff of ${a} and Inductor's kernels for ${answer.name} as logged in ${b}`;
  document.querySelector(".workspace").replaceWith(pane.el);
  pane.show({ label: `A · trace ${a} (Kernelscope)`, href: `/t/${a}`, trace: left,
    kernels: oursKernels(left) },
  { label: `B · TorchInductor, ${answer.name} as logged in trace ${b}`, href: `/t/${b}`,
    trace: right, kernels: inductorKernels(right), inductor: true }, answer.groups);
  window.kernelscope = { ...(window.kernelscope ?? {}), diff: pane };
  return pane;
}
