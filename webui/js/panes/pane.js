// The interface every pane implements, as a small base class (like Compiler Explorer's
// `Pane<S>`). A pane is an ES module with no page assumptions: it builds its own element,
// reads only the trace it is handed and the `ctx` it was given, and reaches the page
// (selection, colours, libraries, highlighting) only through `ctx`. The web UI and the VS
// Code webview both build panes this way; docs/webui.md documents the contract.
//
//   ctx.index()                the provenance index of the current trace (provenance.js)
//   ctx.current()              the current selection
//   ctx.hover(sel) / unhover() a transient selection
//   ctx.pin(sel) / clearPin()  a pinned selection
//   ctx.kernelColour(gid, k)   the kernel's colour
//   ctx.cytoscape()            a promise of the cytoscape function (graph pane only)
//   ctx.highlight(code, lang)  a promise of Pygments HTML or null (optional)

import { h } from "../dom.js";

export class Pane {
  // `id` and `title` name the pane (tab id and label); subclasses set them as fields.
  constructor(ctx, tag = "div.pane-body") {
    this.ctx = ctx;
    this.el = h(tag);
  }

  // Back to the empty state (a new compile starts).
  reset() {}

  // Called for every event, in order; a pane re-renders only for the stages it shows.
  update(_trace, _stage) {}

  // Marks this pane's elements for a selection (provenance.js).
  select(_selection) {}

  // The pane became visible (a tab switch, a resize): lay out what needs a size.
  shown() {}

  // `data-filled` tells tabs (and tests) that the pane has content.
  setFilled(flag = true) {
    if (flag) this.el.dataset.filled = "true";
    else delete this.el.dataset.filled;
  }
}
