// The CodeMirror 6 surface the web UI uses, re-exported from one ES module so the page
// needs no bundler at runtime. build.mjs bundles this file into ../vendor/codemirror.js.
export { EditorState, StateEffect, StateField, Compartment, RangeSetBuilder } from "@codemirror/state";
export {
  EditorView, Decoration, ViewPlugin, keymap, lineNumbers, highlightActiveLine,
  highlightActiveLineGutter, drawSelection, gutter, GutterMarker,
} from "@codemirror/view";
export { defaultKeymap, history, historyKeymap, indentWithTab } from "@codemirror/commands";
export {
  HighlightStyle, syntaxHighlighting, indentOnInput, bracketMatching, foldGutter,
} from "@codemirror/language";
export { tags } from "@lezer/highlight";
export { python } from "@codemirror/lang-python";
