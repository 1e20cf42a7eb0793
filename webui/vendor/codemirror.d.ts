// Ours, not vendored: what the type check of webui/js (webui/tsconfig.json) sees of the
// bundled CodeMirror in codemirror.js beside it (vendor-src/codemirror-entry.js lists
// the same names). Untyped on purpose: the check is about the UI's events, and the bundle
// ships no declarations.
export const EditorState: any, StateEffect: any, StateField: any, Compartment: any,
  RangeSetBuilder: any, EditorView: any, Decoration: any, ViewPlugin: any, keymap: any,
  lineNumbers: any, highlightActiveLine: any, highlightActiveLineGutter: any,
  drawSelection: any, gutter: any, GutterMarker: any, defaultKeymap: any, history: any,
  historyKeymap: any, indentWithTab: any, HighlightStyle: any, syntaxHighlighting: any,
  indentOnInput: any, bracketMatching: any, foldGutter: any, tags: any, python: any;
