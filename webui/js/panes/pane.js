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

import { h, clear, empty } from "../dom.js";

/** @typedef {import("../trace.js").Trace} Trace */
/** @typedef {import("../../types/events").StageName} StageName */

export class Pane {
  // `id` and `title` name the pane (tab id and label); subclasses set them as fields, with
  // `stages` (the events it renders) and `placeholder` (what it says while empty).
  /** @type {string} */ id = "";
  /** @type {string} */ title = "";
  /** @type {readonly string[]} */ stages = [];
  placeholder = "";

  constructor(ctx, tag = "div.pane-body") {
    this.ctx = ctx;
    this.el = h(tag);
  }

  // Back to the empty state (a new compile starts): what the pane keeps of the last trace
  // is dropped (`forget`), then it shows its placeholder, unfilled.
  reset() {
    this.forget();
    this.setFilled(false);
    clear(this.el, empty(this.placeholder));
  }

  // Drops the pane's own state of the last trace (subclasses that keep any).
  forget() {}

  // Whether the pane renders this event: one of its `stages`, unless a subclass says more.
  /** @param {Trace} _trace @param {StageName} stage */
  handles(_trace, stage) {
    return this.stages.includes(stage);
  }

  // Called for every event, in order; the pane renders the events it handles, and is
  // filled when its rendering says it has content.
  /** @param {Trace} trace @param {StageName} stage */
  update(trace, stage) {
    if (this.handles(trace, stage)) this.setFilled(this.render(trace, stage));
  }

  // Draws the pane for one of its events; returns whether the pane now has content.
  /** @param {Trace} _trace @param {StageName} _stage @returns {boolean} */
  render(_trace, _stage) {
    return false;
  }

  // Marks this pane's elements for a selection (provenance.js).
  select(_selection) {}

  // The pane became visible (a tab switch, a resize): lay out what needs a size.
  shown() {}

  // `data-filled` tells tabs (and tests) that the pane has content; only the base writes it.
  get filled() {
    return this.el.dataset.filled === "true";
  }

  setFilled(flag = true) {
    if (flag) this.el.dataset.filled = "true";
    else delete this.el.dataset.filled;
  }
}
