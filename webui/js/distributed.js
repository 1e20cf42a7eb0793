// The distributed step of a recorded run, in the run panel: which rank this trace is, with
// the other ranks' traces one click away (options.recorded.ranks, written by `kernelscope
// open` on a multi-process run), and per graph the DDP bucket it is (capture graph
// `split`, with DDPOptimizer's reason), the collectives it holds with their sizes
// (lowering extern `collective`) and the buffers each holds until its wait (memory
// `holds`). Nothing for a one-process run without collectives.

import { h, fmtBytes } from "./dom.js";

/** @typedef {import("./trace.js").Trace} Trace */

// "rank 0 of 2 · rank 1": this trace's rank and links to the others.
export function ranksLine(run) {
  if (run?.rank == null) return null;
  const links = (run.ranks ?? []).map((r, i) => [i ? " · " : " ", h("a.rank-link", { href: r.url }, `rank ${r.rank}`)]);
  return h("div.run-ranks", h("span.rank-tag", `rank ${run.rank} of ${run.world_size ?? "?"}`),
    links.length ? h("span", " other ranks:", ...links) : null);
}

/** @param {Trace} trace */
export function distributedSection(trace) {
  const rows = trace.graphs("capture").map((g) => graphRow(trace, g)).filter(Boolean);
  if (!rows.length) return null;
  return h("details.run-distributed", { open: true },
    h("summary", `Distributed step: ${rows.length} graphs with a bucket split or collectives`),
    h("table", h("tr", h("th", "graph"), h("th", "split"), h("th", "collectives"),
      h("th", "held until their wait")), rows));
}

// A functional collective's call as the lowering event names it (extern.collective).
/** @typedef {{kind: string, op: string, input: string, group: string, group_size: number | null,
 *   reduce_op: string | null, bytes_in: number, bytes_out: number}} CollectiveCall */

/** @param {Trace} trace */
function graphRow(trace, g) {
  const calls = (trace.graph("lowering", g.id)?.buffers ?? []).filter((b) => b.extern?.collective)
    .map((b) => ({ buffer: b.name, .../** @type {CollectiveCall} */ (b.extern.collective) }));
  const holds = trace.graph("memory", g.id)?.holds ?? [];
  if (!g.split && !calls.length) return null;
  const split = g.split;
  return h("tr", { dataset: { graph: g.id } },
    h("td", `${g.kind} ${g.id}`),
    h("td", { title: split?.reason ?? "" }, split
      ? `${split.by}: bucket ${split.index + 1} of ${split.count} (${fmtBytes(split.bucket_bytes)}, cap ${fmtBytes(split.bucket_cap)})`
      : "–"),
    h("td", { title: calls.map(callText).join("\n") }, calls.length ? byKind(calls) : "–"),
    h("td", { title: holds.map((x) => `${x.buffer}: ${x.why} of ${x.collective}, until ${x.wait || "the end"}`).join("\n") },
      holds.length ? `${holds.length} buffers` : "–"));
}

const callText = (c) => `${c.buffer} = ${c.kind} of ${c.input}: ${fmtBytes(c.bytes_in)} in, ` +
  `${fmtBytes(c.bytes_out)} out${c.group_size ? `, group of ${c.group_size}` : ""}${c.reduce_op ? `, ${c.reduce_op}` : ""}`;

// "20 all-gather (1.2 MB in, 2.4 MB out)": the collectives of a graph, by kind.
function byKind(calls) {
  const kinds = new Map();
  for (const c of calls) {
    const k = kinds.get(c.kind) ?? { n: 0, bytesIn: 0, bytesOut: 0 };
    kinds.set(c.kind, { n: k.n + 1, bytesIn: k.bytesIn + c.bytes_in, bytesOut: k.bytesOut + c.bytes_out });
  }
  return [...kinds].map(([kind, k]) =>
    `${k.n} ${kind} (${fmtBytes(k.bytesIn)} in, ${fmtBytes(k.bytesOut)} out)`).join(", ");
}
