// The snippet editor: CodeMirror 6 with Python highlighting and line numbers, plus the
// provenance layer: coloured backgrounds for lines that produced code, a stronger mark for
// the selected lines, a red mark for the line an error names, and hover/click reporting.

import {
  EditorState, StateEffect, StateField, Compartment, RangeSetBuilder, EditorView, Decoration,
  keymap, lineNumbers, highlightActiveLine, highlightActiveLineGutter, drawSelection,
  defaultKeymap, history, historyKeymap, indentWithTab, HighlightStyle, syntaxHighlighting,
  indentOnInput, bracketMatching, tags as t, python,
} from "../vendor/codemirror.js";
import { lineColour } from "./provenance.js";
import { BIDI, BIDI_NAMES } from "./bidi.js";

// Token colours are CSS variables, so the light and dark themes (app.css) both apply.
const highlightStyle = HighlightStyle.define([
  { tag: t.keyword, color: "var(--tok-keyword)" },
  { tag: [t.controlKeyword, t.moduleKeyword, t.operatorKeyword], color: "var(--tok-keyword)" },
  { tag: [t.definition(t.variableName), t.function(t.definition(t.variableName))],
    color: "var(--tok-function)" },
  { tag: [t.function(t.variableName), t.function(t.propertyName)], color: "var(--tok-function)" },
  { tag: t.propertyName, color: "var(--tok-property)" },
  { tag: [t.string, t.special(t.string)], color: "var(--tok-string)" },
  { tag: [t.number, t.bool, t.null], color: "var(--tok-number)" },
  { tag: t.comment, color: "var(--tok-comment)", fontStyle: "italic" },
  { tag: [t.className, t.definition(t.className)], color: "var(--tok-class)" },
  { tag: t.self, color: "var(--tok-self)" },
  { tag: [t.operator, t.punctuation], color: "var(--tok-operator)" },
]);

const theme = EditorView.theme({
  "&": { height: "100%", backgroundColor: "var(--bg-code)", color: "var(--fg)" },
  ".cm-scroller": { fontFamily: "var(--mono)", fontSize: "13px", lineHeight: "1.55" },
  ".cm-content": { caretColor: "var(--caret)" },
  ".cm-gutters": { backgroundColor: "var(--bg-code)", color: "var(--fg-dim)", border: "none" },
  ".cm-activeLine": { backgroundColor: "var(--active-line)" },
  ".cm-activeLineGutter": { backgroundColor: "transparent", color: "var(--fg)" },
  "&.cm-focused .cm-selectionBackground, .cm-selectionBackground, ::selection":
    { backgroundColor: "rgba(130,170,255,0.25)" },
  "&.cm-focused": { outline: "none" },
});

// The provenance decorations: {lines: Set, selected: Set, error: line|null, breaks: Set}.
const setMarks = StateEffect.define();
const marksField = StateField.define({
  create: () => Decoration.none,
  update(decos, tr) {
    for (const e of tr.effects) if (e.is(setMarks)) return buildDecos(tr.state, e.value);
    return decos.map(tr.changes);
  },
  provide: (f) => EditorView.decorations.from(f),
});

// Bidirectional control characters shown as markers (bidi.js), wherever the snippet has them.
const bidiField = StateField.define({
  create: (state) => bidiDecos(state),
  update: (decos, tr) => (tr.docChanged ? bidiDecos(tr.state) : decos),
  provide: (f) => EditorView.decorations.from(f),
});

function bidiDecos(state) {
  const builder = new RangeSetBuilder();
  for (const m of state.doc.toString().matchAll(BIDI)) {
    const name = BIDI_NAMES[m[0]];
    builder.add(m.index, m.index + 1, Decoration.mark({
      class: "bidi", attributes: { "data-bidi": name, title: `${name}: a bidirectional control character` },
    }));
  }
  return builder.finish();
}

function buildDecos(state, { lines, selected, error, breaks }) {
  const builder = new RangeSetBuilder();
  for (let n = 1; n <= state.doc.lines; n++) {
    const classes = [];
    if (lines.has(n)) classes.push("ks-pv");
    if (selected.has(n)) classes.push("ks-hl");
    if (error === n) classes.push("ks-err");
    if (breaks.has(n)) classes.push("ks-break");
    if (!classes.length) continue;
    const attrs = { class: classes.join(" "), "data-line": String(n) };
    if (lines.has(n)) attrs.style = `--pc: ${lineColour(n)}`;
    builder.add(state.doc.line(n).from, state.doc.line(n).from, Decoration.line({ attributes: attrs }));
  }
  return builder.finish();
}

export class Editor {
  /**
   * @param {HTMLElement} parent
   * @param {{ onHoverLine?: (line: number | null) => void, onClickLine?: (line: number) => void,
   *   onRun?: () => void, onChange?: () => void, onCursorLine?: (line: number) => void }} handlers
   */
  constructor(parent, { onHoverLine, onClickLine, onRun, onChange = () => {},
    onCursorLine = () => {} }) {
    this.readOnly = new Compartment();
    this.marks = { lines: new Set(), selected: new Set(), error: null, breaks: new Set() };
    this.hoverLine = null;
    const lineAt = (view, event) => {
      const pos = view.posAtCoords({ x: event.clientX, y: event.clientY });
      return pos === null ? null : view.state.doc.lineAt(pos).number;
    };
    this.view = new EditorView({
      parent,
      state: EditorState.create({
        doc: "",
        extensions: [
          lineNumbers(), highlightActiveLineGutter(), history(), drawSelection(),
          indentOnInput(), bracketMatching(), highlightActiveLine(), python(),
          syntaxHighlighting(highlightStyle), theme, marksField, bidiField,
          EditorState.tabSize.of(4),
          // Wrapped lines: no sideways scroll that could hide the start of every line.
          EditorView.lineWrapping,
          EditorView.updateListener.of((update) => {
            if (update.docChanged) onChange();
            else if (update.selectionSet && update.view.hasFocus && !this.programmatic) {
              onCursorLine(update.state.doc.lineAt(update.state.selection.main.head).number);
            }
          }),
          this.readOnly.of([]),
          keymap.of([
            { key: "Mod-Enter", run: () => { onRun(); return true; } },
            ...defaultKeymap, ...historyKeymap, indentWithTab,
          ]),
          EditorView.domEventHandlers({
            mousemove: (event, view) => {
              const line = lineAt(view, event);
              if (line !== this.hoverLine) {
                this.hoverLine = line;
                onHoverLine(line);
              }
            },
            mouseleave: () => {
              this.hoverLine = null;
              onHoverLine(null);
            },
            click: (event, view) => onClickLine(lineAt(view, event)),
          }),
        ],
      }),
    });
  }

  get code() {
    return this.view.state.doc.toString();
  }

  set code(text) {
    this.programmatic = true;
    this.view.dispatch({ changes: { from: 0, to: this.view.state.doc.length, insert: text },
      selection: { anchor: 0 }, scrollIntoView: true });
    this.view.scrollDOM.scrollLeft = 0;
    this.programmatic = false;
  }

  setReadOnly(flag) {
    this.view.dispatch({ effects: this.readOnly.reconfigure(
      flag ? [EditorState.readOnly.of(true), EditorView.editable.of(false)] : []) });
    this.view.dom.classList.toggle("ks-readonly", flag);
  }

  // Updates the provenance marks; each argument left undefined keeps its value.
  /** @param {{ lines?: Set<number>, selected?: Set<number>, error?: number | null,
   *   breaks?: Set<number> }} [marks] */
  mark({ lines, selected, error, breaks } = {}) {
    const next = { ...this.marks };
    if (lines !== undefined) next.lines = lines;
    if (breaks !== undefined) next.breaks = breaks;
    if (selected !== undefined) next.selected = selected;
    if (error !== undefined) next.error = error;
    // An update is a dispatch, which can make the page lay out: none when nothing changed
    // (the same marks on the same text; a new text is a new `doc`).
    const same = (a, b) => a === b || (a.size === b.size && [...a].every((x) => b.has(x)));
    if (this.markedDoc === this.view.state.doc && next.error === this.marks.error
      && same(next.lines, this.marks.lines) && same(next.breaks, this.marks.breaks)
      && same(next.selected, this.marks.selected)) return;
    this.marks = next;
    this.view.dispatch({ effects: setMarks.of(this.marks) });
    this.markedDoc = this.view.state.doc;
  }

  revealLine(n) {
    if (n < 1 || n > this.view.state.doc.lines) return;
    const line = this.view.state.doc.line(n);
    this.programmatic = true;
    this.view.dispatch({ selection: { anchor: line.from },
      effects: EditorView.scrollIntoView(line.from, { y: "center", x: "start" }) });
    this.programmatic = false;
    this.view.focus();
  }
}
