// The snippet editor: CodeMirror 6 with Python highlighting and line numbers, plus the
// provenance layer: coloured backgrounds for lines that produced code, a stronger mark for
// the selected lines, a red mark for the line an error names, and hover/click reporting.
// CodeMirror (the page's largest module) is loaded and its view made on `load()`: a
// permalink draws its code pane first. Until then the editor keeps its text, marks and
// read-only flag, and the view starts with them.

import { lineColour } from "./provenance.js";
import { BIDI, BIDI_NAMES } from "./bidi.js";
import { nextTask } from "./dom.js";

/** @typedef {typeof import("../vendor/codemirror.js")} CodeMirror */

// The view's extensions that do not depend on one editor: token colours (CSS variables,
// so the light and dark themes of app.css both apply), the theme, the provenance marks
// and the bidirectional-character markers.
/** @param {CodeMirror} cm */
function shared(cm) {
  const { HighlightStyle, EditorView, StateEffect, StateField, Decoration, tags: t } = cm;
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
      for (const e of tr.effects) if (e.is(setMarks)) return buildDecos(cm, tr.state, e.value);
      return decos.map(tr.changes);
    },
    provide: (f) => EditorView.decorations.from(f),
  });
  // Bidirectional control characters shown as markers (bidi.js), wherever the snippet has them.
  const bidiField = StateField.define({
    create: (state) => bidiDecos(cm, state),
    update: (decos, tr) => (tr.docChanged ? bidiDecos(cm, tr.state) : decos),
    provide: (f) => EditorView.decorations.from(f),
  });
  return { setMarks, extensions: [cm.syntaxHighlighting(highlightStyle), theme, marksField,
    bidiField] };
}

/** @param {CodeMirror} cm */
function bidiDecos(cm, state) {
  const builder = new cm.RangeSetBuilder();
  for (const m of state.doc.toString().matchAll(BIDI)) {
    const name = BIDI_NAMES[m[0]];
    builder.add(m.index, m.index + 1, cm.Decoration.mark({
      class: "bidi", attributes: { "data-bidi": name, title: `${name}: a bidirectional control character` },
    }));
  }
  return builder.finish();
}

/** @param {CodeMirror} cm */
function buildDecos(cm, state, { lines, selected, error, breaks }) {
  const builder = new cm.RangeSetBuilder();
  for (let n = 1; n <= state.doc.lines; n++) {
    const classes = [];
    if (lines.has(n)) classes.push("ks-pv");
    if (selected.has(n)) classes.push("ks-hl");
    if (error === n) classes.push("ks-err");
    if (breaks.has(n)) classes.push("ks-break");
    if (!classes.length) continue;
    const attrs = { class: classes.join(" "), "data-line": String(n) };
    if (lines.has(n)) attrs.style = `--pc: ${lineColour(n)}`;
    builder.add(state.doc.line(n).from, state.doc.line(n).from, cm.Decoration.line({ attributes: attrs }));
  }
  return builder.finish();
}

export class Editor {
  /**
   * @param {HTMLElement} parent
   * @param {{ onHoverLine?: (line: number | null) => void, onClickLine?: (line: number) => void,
   *   onRun?: () => void, onChange?: () => void, onCursorLine?: (line: number) => void }} handlers
   */
  constructor(parent, handlers) {
    this.parent = parent;
    this.handlers = handlers;
    this.marks = { lines: new Set(), selected: new Set(), error: null, breaks: new Set() };
    this.text = "";
    this.locked = false;
    this.hoverLine = null;
    /** @type {any} */
    this.view = null;
    /** @type {Promise<void> | null} */
    this.ready = null;
  }

  // Loads CodeMirror (once) and makes the view, with the text, marks and read-only flag
  // set meanwhile. The view is made in a task after the module's evaluation: the two made
  // one long task.
  load() {
    this.ready ??= import("../vendor/codemirror.js").then(async (cm) => {
      await nextTask();
      this.build(cm);
    });
    return this.ready;
  }

  /** @param {CodeMirror} cm */
  build(cm) {
    const { onHoverLine, onClickLine, onRun, onChange = () => {},
      onCursorLine = () => {} } = this.handlers;
    const { EditorState, EditorView, Compartment, keymap } = cm;
    const { setMarks, extensions } = shared(cm);
    this.cm = cm;
    this.setMarks = setMarks;
    this.readOnly = new Compartment();
    const lineAt = (view, event) => {
      const pos = view.posAtCoords({ x: event.clientX, y: event.clientY });
      return pos === null ? null : view.state.doc.lineAt(pos).number;
    };
    this.view = new EditorView({
      parent: this.parent,
      state: EditorState.create({
        doc: this.text,
        extensions: [
          cm.lineNumbers(), cm.highlightActiveLineGutter(), cm.history(), cm.drawSelection(),
          cm.indentOnInput(), cm.bracketMatching(), cm.highlightActiveLine(), cm.python(),
          ...extensions,
          EditorState.tabSize.of(4),
          // Wrapped lines: no sideways scroll that could hide the start of every line.
          EditorView.lineWrapping,
          EditorView.updateListener.of((update) => {
            if (update.docChanged) onChange();
            else if (update.selectionSet && update.view.hasFocus && !this.programmatic) {
              onCursorLine(update.state.doc.lineAt(update.state.selection.main.head).number);
            }
          }),
          this.readOnly.of(this.lockExtensions(this.locked)),
          keymap.of([
            { key: "Mod-Enter", run: () => { onRun(); return true; } },
            ...cm.defaultKeymap, ...cm.historyKeymap, cm.indentWithTab,
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
    this.view.dom.classList.toggle("ks-readonly", this.locked);
    this.view.dispatch({ effects: setMarks.of(this.marks) });
    this.markedDoc = this.view.state.doc;
  }

  lockExtensions(flag) {
    const { EditorState, EditorView } = this.cm;
    return flag ? [EditorState.readOnly.of(true), EditorView.editable.of(false)] : [];
  }

  get code() {
    return this.view ? this.view.state.doc.toString() : this.text;
  }

  set code(text) {
    this.text = text;
    if (!this.view) return;
    this.programmatic = true;
    this.view.dispatch({ changes: { from: 0, to: this.view.state.doc.length, insert: text },
      selection: { anchor: 0 }, scrollIntoView: true });
    this.view.scrollDOM.scrollLeft = 0;
    this.programmatic = false;
  }

  setReadOnly(flag) {
    this.locked = flag;
    if (!this.view) return;
    this.view.dispatch({ effects: this.readOnly.reconfigure(this.lockExtensions(flag)) });
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
    if (!this.view) {
      this.marks = next;
      return;
    }
    if (this.markedDoc === this.view.state.doc && next.error === this.marks.error
      && same(next.lines, this.marks.lines) && same(next.breaks, this.marks.breaks)
      && same(next.selected, this.marks.selected)) return;
    this.marks = next;
    this.view.dispatch({ effects: this.setMarks.of(this.marks) });
    this.markedDoc = this.view.state.doc;
  }

  revealLine(n) {
    if (!this.view || n < 1 || n > this.view.state.doc.lines) return;
    const line = this.view.state.doc.line(n);
    this.programmatic = true;
    this.view.dispatch({ selection: { anchor: line.from },
      effects: this.cm.EditorView.scrollIntoView(line.from, { y: "center", x: "start" }) });
    this.programmatic = false;
    this.view.focus();
  }
}
