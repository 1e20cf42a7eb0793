/**
 * From an editor selection to the request the server compiles (docs/server.md
 * `POST /api/compile`: `code` and `entry`). Comes in: the file's text and the selected
 * lines. Goes out: the snippet, its entry, which parameters still need example inputs, and
 * a map from snippet lines back to file lines.
 *
 * The rule (docs/extension.md, "What Compile Selection sends"): the server always gets the
 * whole file, unchanged and with its own line numbers, so every name the file defines
 * resolves and every line the compiler reports is a line of the file. The selection picks
 * the entry region:
 * - inside or on a function: that top-level function is the entry;
 * - inside or on a method of a class (an nn.Module): an instance of that class is the entry;
 * - statements that are not a whole function: they are appended, dedented, as the body of a
 *   function `__kernelscope_selection__` whose parameters are the names the statements read
 *   but neither bind nor find at the file's top level; its lines map back to the selection.
 * Example inputs come from the file when it gives them for that entry (its torch.compile
 * call, or `example_inputs` for the default entry); otherwise the user is asked, per
 * parameter, and the answer is appended as `example_inputs`.
 */

import {
  Definition, Param, blankStringsAndComments, blockNames, commonIndent, definitions, topLevelNames,
} from "./python";

export const SELECTION_FN = "__kernelscope_selection__";
export const MODULE_INSTANCE = "__kernelscope_module__";

export type Region =
  | { kind: "file" }
  | { kind: "function"; def: Definition }
  | { kind: "module"; cls: Definition; instance: string | null; forward: Definition | null }
  | { kind: "block"; start: number; end: number; free: string[]; returns: string[]; enclosing: Definition | null };

export interface Plan {
  region: Region;
  /** Shown in the panel and the status bar: "function gelu", "lines 5-7". */
  label: string;
  /** Where remembered inputs are kept: the function's dotted name, or the region. */
  key: string;
  /** The entry sent to the server, or null to let the snippet's own rules pick it. */
  entry: string | null;
  /** Parameters that still need example inputs (empty when the file gives them). */
  needsInputs: Param[];
  /** Where the example inputs come from. */
  inputsFrom: "torch.compile call" | "example_inputs" | "asked" | "none";
  /** The selected lines, 1-based inclusive (the whole file for Compile File). */
  lines: [number, number];
}

export interface Snippet {
  code: string;
  entry: string | null;
  /** [snippet line, file line] for lines the extension appended from the selection. */
  lineMap: [number, number][];
  /** Lines of the file; a line past it that is not in lineMap came from the extension. */
  fileLines: number;
}

/** The name passed to the first torch.compile (call or decorator) in the file, if any. */
export function firstCompiled(text: string): string | null {
  const blank = blankStringsAndComments(text);
  const call = /torch\.compile\(\s*([A-Za-z_][\w.]*)/.exec(blank);
  const deco = /@torch\.compile\b[^\n]*\n(?:\s*@[^\n]*\n)*\s*(?:async\s+)?def\s+([A-Za-z_]\w*)/.exec(blank);
  const hits = [call, deco].filter((m): m is RegExpExecArray => m !== null);
  hits.sort((a, b) => a.index - b.index);
  return hits[0]?.[1] ?? null;
}

/** The top-level name `NAME = Class(...)` binding an instance of `cls`, if any (the last). */
function instanceOf(text: string, cls: string): string | null {
  const re = new RegExp(`^([A-Za-z_]\\w*)\\s*=\\s*${cls}\\s*\\(`, "gm");
  let found: string | null = null;
  for (const m of blankStringsAndComments(text).matchAll(re)) found = m[1];
  return found;
}

/** The entry the snippet rules pick for `example_inputs`: `entry`, else the last top-level def. */
function defaultEntry(text: string): string | null {
  const blank = blankStringsAndComments(text);
  const explicit = /^entry\s*=\s*([A-Za-z_]\w*)\s*$/m.exec(blank);
  if (explicit) return explicit[1];
  const top = definitions(text).filter((d) => d.indent === 0 && d.kind === "def");
  const lastDef = top[top.length - 1];
  const instances = [...blank.matchAll(/^([A-Za-z_]\w*)\s*=\s*[A-Za-z_][\w.]*\s*\(/gm)];
  const lastInstance = instances[instances.length - 1];
  if (lastInstance && (!lastDef || lastInstance.index > lastDef.line)) {
    // Might be a module instance (the runtime decides); count it only when its class is here.
    const cls = /=\s*([A-Za-z_]\w*)/.exec(lastInstance[0])?.[1];
    if (cls && definitions(text).some((d) => d.kind === "class" && d.name === cls)) return lastInstance[1];
  }
  return lastDef?.name ?? null;
}

const hasExampleInputs = (text: string) =>
  /^(example_inputs|inputs)\s*=/m.test(blankStringsAndComments(text));

/** Plans "Compile Selection" for the 1-based inclusive lines [start, end]. */
export function planSelection(text: string, start: number, end: number): Plan {
  const defs = definitions(text);
  const lines: [number, number] = [start, end];
  const containing = defs.filter((d) => d.startLine <= start && start <= d.endLine);
  const innermost = containing[containing.length - 1] ?? null;
  const wholeOrHeader = (d: Definition) => start <= d.line || (start === end && start <= d.endLine);
  const selectsDef = innermost && (wholeOrHeader(innermost) || start === end);
  if (innermost && selectsDef) return planDefinition(text, innermost, lines);
  if (!innermost) {
    const first = defs.find((d) => d.indent === 0 && start <= d.startLine && d.startLine <= end);
    const onlyDefs = first && blockIsDefinitions(text, start, end);
    if (first && onlyDefs) return planDefinition(text, first, lines);
  }
  return planBlock(text, start, end, innermost);
}

/** True when the lines hold nothing but blank lines, comments and definitions. */
function blockIsDefinitions(text: string, start: number, end: number): boolean {
  const defs = definitions(text).filter((d) => d.indent === 0);
  const blank = blankStringsAndComments(text).split("\n");
  for (let n = start; n <= end; n++) {
    if (!blank[n - 1]?.trim()) continue;
    if (!defs.some((d) => d.startLine <= n && n <= d.endLine)) return false;
  }
  return true;
}

function planDefinition(text: string, d: Definition, lines: [number, number]): Plan {
  let top = d;
  while (top.parent && !(top.kind === "def" && top.parent.kind === "class")) top = top.parent;
  // A method: its class is what runs; an instance is the entry.
  const cls = top.kind === "class" ? top : top.parent?.kind === "class" ? top.parent : null;
  if (cls) {
    let outer = cls;
    while (outer.parent) outer = outer.parent;
    const forward = definitions(text).find((x) => x.qualname === `${outer.qualname}.forward`) ?? null;
    const instance = instanceOf(text, outer.name);
    const region: Region = { kind: "module", cls: outer, instance, forward };
    const label = `module ${outer.name}`;
    if (instance && firstCompiled(text) === instance) {
      return { region, label, key: outer.qualname, entry: null, needsInputs: [], inputsFrom: "torch.compile call", lines };
    }
    if (instance && hasExampleInputs(text) && defaultEntry(text) === instance) {
      return { region, label, key: outer.qualname, entry: instance, needsInputs: [], inputsFrom: "example_inputs", lines };
    }
    const needs = (forward?.params ?? []).filter((p) => !p.hasDefault);
    return { region, label, key: outer.qualname, entry: instance ?? MODULE_INSTANCE, needsInputs: needs, inputsFrom: "asked", lines };
  }
  const region: Region = { kind: "function", def: top };
  const label = `function ${top.name}`;
  if (firstCompiled(text) === top.name) {
    return { region, label, key: top.qualname, entry: null, needsInputs: [], inputsFrom: "torch.compile call", lines };
  }
  if (hasExampleInputs(text) && defaultEntry(text) === top.name) {
    return { region, label, key: top.qualname, entry: top.name, needsInputs: [], inputsFrom: "example_inputs", lines };
  }
  const needs = top.params.filter((p) => !p.hasDefault);
  return { region, label, key: top.qualname, entry: top.name, needsInputs: needs, inputsFrom: needs.length ? "asked" : "none", lines };
}

function planBlock(text: string, start: number, end: number, enclosing: Definition | null): Plan {
  const body = text.split("\n").slice(start - 1, end).join("\n");
  const { free, bound } = blockNames(body, topLevelNames(text));
  const blank = blankStringsAndComments(body).split("\n").filter((l) => l.trim());
  const last = blank[blank.length - 1] ?? "";
  const lastBinds = bound.filter((n) => new RegExp(`(?<![\\w.])${n}(?!\\w)`).test(last.split("=")[0]));
  const returns = /^\s*return\b/m.test(blankStringsAndComments(body)) ? [] : lastBinds.length ? lastBinds : bound.slice(-1);
  const region: Region = { kind: "block", start, end, free, returns, enclosing };
  const where = enclosing ? ` of ${enclosing.qualname}` : "";
  return {
    region, label: `lines ${start}-${end}${where}`, key: `${enclosing?.qualname ?? "<module>"}:${body.trim()}`,
    entry: SELECTION_FN, needsInputs: free.map((name) => ({ name, hasDefault: false })),
    inputsFrom: free.length ? "asked" : "none", lines: [start, end],
  };
}

/** Plans "Compile File": the snippet's own rules, or its last function when it gives no inputs. */
export function planFile(text: string): Plan {
  const count = text.split("\n").length;
  if (firstCompiled(text) || hasExampleInputs(text)) {
    return { region: { kind: "file" }, label: "file", key: "<file>", entry: null, needsInputs: [],
      inputsFrom: firstCompiled(text) ? "torch.compile call" : "example_inputs", lines: [1, count] };
  }
  const top = definitions(text).filter((d) => d.indent === 0 && d.kind === "def");
  const last = top[top.length - 1];
  if (!last) {
    return { region: { kind: "file" }, label: "file", key: "<file>", entry: null, needsInputs: [], inputsFrom: "none", lines: [1, count] };
  }
  return { ...planDefinition(text, last, [1, count]) };
}

const DTYPES: Record<string, string> = {
  float32: "float32", f32: "float32", float: "float32", float16: "float16", f16: "float16",
  half: "float16", bfloat16: "bfloat16", bf16: "bfloat16", float64: "float64", f64: "float64",
  double: "float64", int64: "int64", i64: "int64", long: "int64", int32: "int32", i32: "int32",
  int: "int32", int16: "int16", int8: "int8", uint8: "uint8", bool: "bool",
};

/** The default an input box offers for a parameter the user has not answered before. */
export const DEFAULT_INPUT = "float32[64, 1024]";

/** Parses "float32[128, 1024]" (dtype optional, float32 by default); null if it is not one. */
export function parseTensorSpec(spec: string): { dtype: string; shape: number[] } | null {
  const m = /^\s*([A-Za-z]\w*)?\s*\[\s*([\d\s,]*)\]\s*$/.exec(spec);
  if (!m) return null;
  const dtype = m[1] ? DTYPES[m[1].toLowerCase()] : "float32";
  if (!dtype) return null;
  const shape = m[2].split(",").map((s) => s.trim()).filter(Boolean).map(Number);
  if (shape.some((n) => !Number.isInteger(n) || n < 0)) return null;
  return { dtype, shape };
}

/** A spec as a Python expression: a random tensor, or the text itself (a Python literal). */
export function inputExpression(spec: string, torch = "__kernelscope_torch"): string {
  const t = parseTensorSpec(spec);
  if (!t) return spec.trim();
  const shape = `(${t.shape.join(", ")}${t.shape.length === 1 ? "," : ""})`;
  if (t.dtype === "bool") return `${torch}.rand(${shape}) > 0.5`;
  if (t.dtype.startsWith("int") || t.dtype === "uint8") {
    return `${torch}.randint(0, 16, ${shape}, dtype=${torch}.${t.dtype})`;
  }
  return `${torch}.randn(${shape}, dtype=${torch}.${t.dtype})`;
}

/** True when `spec` can be sent: a tensor spec, or one line of something else. */
export function validInput(spec: string): string | null {
  if (!spec.trim()) return "give dtype[shape], e.g. float32[128, 1024], or a Python expression";
  if (spec.includes("\n")) return "one line, please";
  if (/^\s*[A-Za-z]\w*\s*\[/.test(spec) && !parseTensorSpec(spec)) {
    return "unknown dtype or shape: use e.g. float32[128, 1024], int64[16], bool[8]";
  }
  return null;
}

/** The snippet for a plan: the file, plus the selection function and inputs it needs. */
export function buildSnippet(text: string, plan: Plan, inputs: string[]): Snippet {
  const fileText = text.endsWith("\n") ? text : text + "\n";
  const fileLines = fileText.split("\n").length - 1;
  const out: string[] = [];
  const lineMap: [number, number][] = [];
  const region = plan.region;
  const next = () => fileLines + out.length + 1;
  if (region.kind === "block") {
    const selected = text.split("\n").slice(region.start - 1, region.end);
    const indent = commonIndent(selected);
    out.push("", `# --- Kernelscope: lines ${region.start}-${region.end} as a function (added by the editor) ---`);
    out.push(`def ${SELECTION_FN}(${region.free.join(", ")}):`);
    selected.forEach((line, i) => {
      lineMap.push([next(), region.start + i]);
      out.push(line.trim() ? "    " + line.slice(indent) : "");
    });
    if (region.returns.length) out.push(`    return ${region.returns.join(", ")}`);
    if (!selected.some((l) => l.trim())) out.push("    pass");
  }
  if (region.kind === "module" && plan.entry === MODULE_INSTANCE) {
    out.push("", `${MODULE_INSTANCE} = ${region.cls.name}().eval().requires_grad_(False)`);
  }
  if (plan.needsInputs.length || (plan.inputsFrom === "none" && plan.entry)) {
    out.push("", `# --- Kernelscope: example inputs for ${plan.label} (added by the editor) ---`,
      "import torch as __kernelscope_torch",
      `example_inputs = (${inputs.map((s) => inputExpression(s)).join(", ")}${inputs.length === 1 ? "," : ""})`);
  }
  return { code: fileText + out.join("\n") + (out.length ? "\n" : ""), entry: plan.entry, lineMap, fileLines };
}

/**
 * Rewrites the source lines an event names (node `line`, `lines` lists, `entry_line`, an
 * error's `line`) from snippet lines to file lines; lines the extension added map to none.
 * A codegen `line_map` entry's own `line` is a kernel line and is left alone.
 */
export function remapLines<T>(value: T, snippet: Pick<Snippet, "lineMap" | "fileLines">): T {
  if (!snippet.lineMap.length && snippet.fileLines === Infinity) return value;
  const map = new Map(snippet.lineMap);
  const one = (n: unknown): number | null =>
    typeof n !== "number" ? (n as null) : map.get(n) ?? (n <= snippet.fileLines ? n : null);
  const walk = (x: unknown, inLineMap: boolean): unknown => {
    if (Array.isArray(x)) return x.map((v) => walk(v, inLineMap));
    if (typeof x !== "object" || x === null) return x;
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(x)) {
      if (k === "lines" && Array.isArray(v)) {
        out[k] = [...new Set(v.map(one).filter((n): n is number => n !== null))];
      } else if ((k === "line" && !inLineMap) || k === "entry_line") {
        out[k] = one(v);
      } else {
        out[k] = walk(v, k === "line_map");
      }
    }
    return out;
  };
  return walk(value, false) as T;
}
