// Measured times as the profile event gives them ({ms, p10, p90, repeats, noisy}: the
// median over repeats and its spread): how one is written, whether a change between two is
// one, and the profile's rows as a Chrome/Perfetto trace. Pure functions; the panes draw.

import { fmtMs } from "./dom.js";

// "0.213 ms (p10–p90 0.209–0.220 ms, 7 repeats)"; a noisy time is its range, never one
// number: "noisy: 0.2 ms – 3.1 ms (7 repeats)".
/** @param {{ms: number|null, p10?: number|null, p90?: number|null, repeats?: number, noisy?: boolean} | null | undefined} t */
export function fmtSpread(t) {
  if (!t || t.ms === null || t.ms === undefined) return "–";
  const n = t.repeats ? `${t.repeats} repeats` : "";
  if (t.p10 === null || t.p10 === undefined || t.p90 === null || t.p90 === undefined) {
    return n ? `${fmtMs(t.ms)} (${n})` : fmtMs(t.ms);
  }
  if (t.noisy) return `noisy: ${fmtMs(t.p10)} – ${fmtMs(t.p90)}${n ? ` (${n})` : ""}`;
  return `${fmtMs(t.ms)} (p10–p90 ${fmtMs(t.p10)}–${fmtMs(t.p90)}${n ? `, ${n}` : ""})`;
}

// The time to show in one cell: the median, or "noisy" with its range in the title.
/** @param {any} t */
export function shortSpread(t) {
  if (!t || t.ms === null || t.ms === undefined) return "–";
  return t.noisy ? `noisy (${fmtMs(t.p10)}–${fmtMs(t.p90)})` : fmtMs(t.ms);
}

const hasSpread = (t) => t && t.ms != null && t.p10 != null && t.p90 != null;

// A change from A to B is one only when it lies outside both runs' spread: B's whole
// p10–p90 above A's (slower) or below it (faster). Without a spread on either side (a
// trace from before spreads were measured) nothing is judged: "".
/** @returns {"faster" | "slower" | ""} */
export function changeClass(a, b) {
  if (!hasSpread(a) || !hasSpread(b)) return "";
  if (b.p10 > a.p90) return "slower";
  if (b.p90 < a.p10) return "faster";
  return "";
}

// The spread of a sum of rows (each row's median, p10 and p90 added): a group's time.
export function sumSpread(times) {
  if (!times.length || times.some((t) => !t || t.ms == null)) return null;
  const add = (k) => (times.every((t) => t[k] != null) ? times.reduce((s, t) => s + t[k], 0) : null);
  const p10 = add("p10"), p90 = add("p90");
  return { ms: add("ms"), p10, p90, repeats: Math.min(...times.map((t) => t.repeats ?? 0)),
    noisy: p10 != null && p90 != null && (p10 <= 0 ? p90 > 0 : p90 / p10 > 1.5) };
}

// Rows sorted by a column and filtered by a search over name, op, module and library.
export function sortRows(rows, key = "ms", desc = true, query = "") {
  const q = query.trim().toLowerCase();
  const hit = (r) => !q || [r.name, r.op, r.module, r.library, r.kind]
    .some((x) => x && String(x).toLowerCase().includes(q));
  const val = (r) => (key === "ms" ? r.time?.ms ?? -1 : String(r[key] ?? ""));
  return rows.filter(hit).sort((x, y) => {
    const a = val(x), b = val(y);
    const c = typeof a === "number" && typeof b === "number" ? a - b : String(a).localeCompare(String(b));
    return desc ? -c : c;
  });
}

// The Chrome trace format (chrome://tracing, ui.perfetto.dev): one complete event ("X")
// per segment of one timed call, ours and eager as two processes, a thread per graph.
export function chromeTrace(profile) {
  const events = [];
  const side = (rowSet, pid, label) => {
    if (!rowSet) return;
    events.push({ name: "process_name", ph: "M", pid, tid: 0, args: { name: label } });
    const kinds = new Map(rowSet.rows.map((r) => [`${r.graph}:${r.name}`, r]));
    for (const t of rowSet.timeline ?? []) {
      const row = kinds.get(`${t.graph}:${t.name}`);
      events.push({ name: t.name === "wrapper" ? (pid === 1 ? "wrapper" : "Python") : t.name,
        cat: row?.kind ?? "wrapper", ph: "X", pid, tid: t.graph, ts: t.start_us, dur: t.dur_us,
        args: row ? { op: row.op, shapes: row.shapes, library: row.library, module: row.module } : {} });
    }
  };
  side(profile.ours, 1, "Kernelscope (compiled)");
  side(profile.eager, 2, "eager");
  return { traceEvents: events, displayTimeUnit: "ms",
    otherData: { device: profile.device, conditions: profile.conditions ?? null } };
}
