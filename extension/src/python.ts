/**
 * Just enough Python structure for "Compile Selection": the functions and classes of a file
 * (by indentation, with multi-line signatures), their parameters, and the free names of a
 * block of statements. Comes in: the file's text. Goes out: plain data (no vscode here).
 *
 * It is a scanner, not a parser: strings and comments are blanked first, so brackets, `def`
 * and names inside them never count. Code it cannot read is left for the compiler, which
 * reports a real syntax error against the user's line.
 */

export interface Param {
  name: string;
  hasDefault: boolean;
}

export interface Definition {
  kind: "def" | "class";
  name: string;
  /** Dotted from the top level: "Block.forward". */
  qualname: string;
  indent: number;
  /** 1-based: the `def`/`class` line (after decorators), and the last line of its body. */
  line: number;
  endLine: number;
  /** The first decorator's line, or `line`. */
  startLine: number;
  decorators: string[];
  params: Param[];
  /** Base classes, for classes: "nn.Module", "torch.nn.Module". */
  bases: string[];
  parent: Definition | null;
}

const KEYWORDS = new Set(("False None True and as assert async await break class continue def " +
  "del elif else except finally for from global if import in is lambda nonlocal not or pass " +
  "raise return try while with yield match case").split(" "));

const BUILTINS = new Set(("abs all any bool bytes callable chr dict dir divmod enumerate " +
  "filter float format frozenset getattr globals hasattr hash hex id int isinstance " +
  "issubclass iter len list locals map max min next object oct ord pow print range repr " +
  "reversed round set setattr slice sorted str sum super tuple type vars zip __name__ " +
  "__file__ Exception ValueError TypeError RuntimeError NotImplementedError").split(" "));

/**
 * The text with every string literal and comment replaced by spaces (line breaks kept), so
 * that positions and line numbers stay those of the original.
 */
export function blankStringsAndComments(text: string): string {
  const out = text.split("");
  let i = 0;
  const blank = (from: number, to: number) => {
    for (let k = from; k < to; k++) if (out[k] !== "\n") out[k] = " ";
  };
  while (i < text.length) {
    const c = text[i];
    if (c === "#") {
      const end = text.indexOf("\n", i);
      const stop = end < 0 ? text.length : end;
      blank(i, stop);
      i = stop;
    } else if (c === "'" || c === '"') {
      const triple = text.startsWith(c.repeat(3), i);
      const quote = triple ? c.repeat(3) : c;
      let j = i + quote.length;
      while (j < text.length) {
        if (text[j] === "\\") { j += 2; continue; }
        if (text.startsWith(quote, j)) { j += quote.length; break; }
        if (!triple && text[j] === "\n") break;
        j++;
      }
      // Keep the quotes so `x = ""` still reads as an assignment of something.
      blank(i + quote.length, Math.max(i + quote.length, j - quote.length));
      i = j;
    } else {
      i++;
    }
  }
  return out.join("");
}

/** Logical lines: a statement that spans lines inside brackets counts once, at its start. */
interface Logical {
  line: number; // 1-based first physical line
  lastLine: number;
  indent: number;
  text: string; // joined, stripped of strings and comments
}

function logicalLines(text: string): Logical[] {
  const lines = blankStringsAndComments(text).split("\n");
  const result: Logical[] = [];
  let depth = 0;
  let current: Logical | null = null;
  lines.forEach((raw, i) => {
    if (current === null) {
      if (raw.trim() === "") return;
      current = { line: i + 1, lastLine: i + 1, indent: raw.length - raw.trimStart().length,
        text: raw.trim() };
    } else {
      current.text += " " + raw.trim();
      current.lastLine = i + 1;
    }
    for (const ch of raw) {
      if ("([{".includes(ch)) depth++;
      else if (")]}".includes(ch)) depth = Math.max(0, depth - 1);
    }
    if (depth === 0 && !raw.trimEnd().endsWith("\\")) {
      result.push(current);
      current = null;
    }
  });
  if (current) result.push(current);
  return result;
}

/** Splits at commas outside brackets. */
function splitTop(s: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < s.length; i++) {
    const ch = s[i];
    if ("([{".includes(ch)) depth++;
    else if (")]}".includes(ch)) depth--;
    else if (ch === "," && depth === 0) {
      parts.push(s.slice(start, i));
      start = i + 1;
    }
  }
  parts.push(s.slice(start));
  return parts.map((p) => p.trim()).filter(Boolean);
}

function inside(text: string, open: number): string {
  let depth = 0;
  for (let i = open; i < text.length; i++) {
    if (text[i] === "(") depth++;
    else if (text[i] === ")" && --depth === 0) return text.slice(open + 1, i);
  }
  return text.slice(open + 1);
}

function parseParams(signature: string): Param[] {
  const params: Param[] = [];
  for (const part of splitTop(signature)) {
    if (part === "/" || part === "*" || part.startsWith("*")) continue;
    const name = part.split(/[:=]/)[0].trim();
    if (!/^[A-Za-z_]\w*$/.test(name)) continue;
    params.push({ name, hasDefault: /=/.test(part.replace(/[=!<>]=/g, "")) });
  }
  return params;
}

const DEF_RE = /^(?:async\s+)?def\s+([A-Za-z_]\w*)\s*\(/;
const CLASS_RE = /^class\s+([A-Za-z_]\w*)\s*(\()?/;

/** Every `def` and `class` of the file, outermost first, with its body's extent. */
export function definitions(text: string): Definition[] {
  const logical = logicalLines(text);
  const defs: Definition[] = [];
  const open: Definition[] = [];
  let decorators: { line: number; text: string }[] = [];
  for (const l of logical) {
    while (open.length && l.indent <= open[open.length - 1].indent) open.pop();
    if (l.text.startsWith("@")) {
      decorators.push({ line: l.line, text: l.text.slice(1).trim() });
      continue;
    }
    const def = DEF_RE.exec(l.text);
    const cls = def ? null : CLASS_RE.exec(l.text);
    if (def || cls) {
      const parent = open[open.length - 1] ?? null;
      const name = (def ?? cls)![1];
      const paren = l.text.indexOf("(");
      const args = paren >= 0 && (def || cls![2]) ? inside(l.text, paren) : "";
      const d: Definition = {
        kind: def ? "def" : "class", name,
        qualname: parent ? `${parent.qualname}.${name}` : name,
        indent: l.indent, line: l.line, endLine: l.lastLine,
        startLine: decorators[0]?.line ?? l.line,
        decorators: decorators.map((x) => x.text),
        params: def ? parseParams(args) : [],
        bases: cls ? splitTop(args) : [],
        parent,
      };
      if (def && parent?.kind === "class") d.params = d.params.filter((p, i) => i > 0 || p.name !== "self");
      defs.push(d);
      open.push(d);
    }
    decorators = [];
    for (const o of open) o.endLine = Math.max(o.endLine, l.lastLine);
  }
  return defs;
}

/** The names a file binds at its top level: defs, classes, imports, assignments. */
export function topLevelNames(text: string): Set<string> {
  const names = new Set<string>();
  for (const l of logicalLines(text)) {
    if (l.indent !== 0) continue;
    for (const n of boundBy(l.text)) names.add(n);
  }
  return names;
}

interface Assignment {
  targets: string;
  value: string;
  augmented: boolean;
}

/** `targets = value` (or `targets op= value`) at the top level of a statement, else null. */
function splitAssign(stmt: string): Assignment | null {
  if (/^(if|elif|while|return|assert|def|class|lambda|with|for|import|from|print)\b/.test(stmt)) return null;
  let depth = 0;
  for (let i = 0; i < stmt.length; i++) {
    const ch = stmt[i];
    if ("([{".includes(ch)) depth++;
    else if (")]}".includes(ch)) depth--;
    else if (ch === "=" && depth === 0) {
      const prev = stmt[i - 1] ?? "";
      if (stmt[i + 1] === "=" || "=!<>:".includes(prev)) {
        if (stmt[i + 1] === "=") i++;
        continue;
      }
      let cut = i;
      while (cut > 0 && "+-*/%&|^@<>".includes(stmt[cut - 1])) cut--;
      const targets = stmt.slice(0, cut).split(":")[0];
      return { targets, value: stmt.slice(i + 1), augmented: cut < i };
    }
  }
  return null;
}

const plainTargets = (t: string) => !/[[.(]/.test(t.replace(/^\s*\(|\)\s*$/g, ""));

/** Names a statement binds (assignment targets, for targets, imports, with-as, def, class). */
function boundBy(stmt: string): string[] {
  let m: RegExpExecArray | null;
  if ((m = DEF_RE.exec(stmt)) || (m = CLASS_RE.exec(stmt))) return [m[1]];
  if ((m = /^import\s+(.+)$/.exec(stmt))) {
    return splitTop(m[1]).map((p) => (p.split(/\s+as\s+/)[1] ?? p.split(".")[0]).trim());
  }
  if ((m = /^from\s+\S+\s+import\s+\(?(.+?)\)?$/.exec(stmt))) {
    return splitTop(m[1]).map((p) => (p.split(/\s+as\s+/)[1] ?? p).trim());
  }
  const found: string[] = [];
  if ((m = /^(?:async\s+)?for\s+(.+?)\s+in\s/.exec(stmt))) found.push(...identifiers(m[1]));
  for (const w of stmt.matchAll(/\bas\s+([A-Za-z_]\w*)/g)) found.push(w[1]);
  const a = splitAssign(stmt);
  if (a && plainTargets(a.targets)) found.push(...identifiers(a.targets));
  return found;
}

/** Names a statement reads: not attributes, keyword arguments or its own plain targets. */
function readBy(stmt: string): string[] {
  const noKwargs = (s: string) => s.replace(/(?<![\w.])[A-Za-z_]\w*\s*=(?!=)/g, " ");
  if (/^(def|class|import|from)\b/.test(stmt)) return [];
  const a = splitAssign(stmt);
  if (a) {
    const reads = identifiers(noKwargs(a.value));
    if (a.augmented || !plainTargets(a.targets)) reads.push(...identifiers(a.targets));
    return reads;
  }
  let s = stmt;
  const m = /^(?:async\s+)?for\s+(.+?)\s+in\s/.exec(s);
  if (m) s = s.slice(m[0].length);
  s = s.replace(/\bas\s+[A-Za-z_]\w*/g, " ");
  return identifiers(noKwargs(s));
}

/** Names local to an expression: comprehension targets and lambda parameters. */
function expressionLocals(stmt: string): Set<string> {
  const local = new Set<string>();
  for (const m of stmt.matchAll(/\bfor\s+(.+?)\s+in\b/g)) identifiers(m[1]).forEach((n) => local.add(n));
  for (const m of stmt.matchAll(/\blambda\b([^:]*):/g)) identifiers(m[1].replace(/=[^,]*/g, "")).forEach((n) => local.add(n));
  return local;
}

function identifiers(s: string): string[] {
  return [...s.matchAll(/(?<![\w.])([A-Za-z_]\w*)(?!\w|["'])/g)].map((m) => m[1])
    .filter((n) => !KEYWORDS.has(n));
}

/**
 * The names a block reads before it binds them, that neither the file's top level nor the
 * builtins provide: the parameters the block needs when it is compiled as a function.
 * Also returns the names the block binds (in order), which that function returns.
 */
export function blockNames(block: string, fileTopLevel: Set<string>): { free: string[]; bound: string[] } {
  const bound: string[] = [];
  const free: string[] = [];
  for (const l of logicalLines(block)) {
    const local = /^(?:async\s+)?for\b/.test(l.text) ? new Set<string>() : expressionLocals(l.text);
    for (const n of readBy(l.text)) {
      if (KEYWORDS.has(n) || BUILTINS.has(n) || fileTopLevel.has(n) || local.has(n)) continue;
      if (!bound.includes(n) && !free.includes(n)) free.push(n);
    }
    for (const n of boundBy(l.text)) if (!bound.includes(n)) bound.push(n);
  }
  return { free, bound };
}

/** The smallest common indentation of the non-blank lines. */
export function commonIndent(lines: string[]): number {
  let min = Infinity;
  for (const l of lines) if (l.trim()) min = Math.min(min, l.length - l.trimStart().length);
  return min === Infinity ? 0 : min;
}
