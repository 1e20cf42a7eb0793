// Unit tests of webui/js/panes/lazy.js, a tab whose pane module loads on first show (no
// browser: a stand-in element that records being replaced):
//   node --test tests/browser/js/
import { test } from "node:test";
import assert from "node:assert/strict";

import { LazyPane } from "../../../webui/js/panes/lazy.js";

function element() {
  const el = { hidden: false, dataset: {}, className: "", replacedBy: null };
  el.replaceWith = (other) => { el.replacedBy = other; };
  return el;
}
globalThis.document = { createElement: element };

// A pane class that records every call, and a loader that counts its imports.
function fixture(id = "graph", title = "Graph") {
  const made = [];
  class Pane {
    id = id;
    title = title;
    constructor(ctx) {
      this.ctx = ctx;
      this.el = element();
      this.calls = [];
      made.push(this);
    }
    update(trace, stage) { this.calls.push(["update", stage]); this.el.dataset.filled = "true"; }
    select(sel) { this.calls.push(["select", sel]); }
    shown() { this.calls.push(["shown"]); }
    reset() { this.calls.push(["reset"]); }
    get filled() { return this.el.dataset.filled === "true"; }
  }
  const loads = { n: 0 };
  const load = async () => { loads.n += 1; return Pane; };
  return { made, loads, load, Pane };
}

test("a selection alone never imports the pane; the first update does, and replays", async () => {
  const { made, loads, load } = fixture();
  const ready = [];
  const lazy = new LazyPane({ tag: "ctx" }, { id: "graph", title: "Graph", load },
    (p) => ready.push(p));
  lazy.el.hidden = true;
  lazy.select("a");
  lazy.select("b");
  assert.equal(loads.n, 0);
  assert.equal(lazy.filled, false);
  lazy.update({}, "capture");
  lazy.update({}, "lowering");
  lazy.shown();
  const standIn = lazy.el;
  await lazy.build();
  assert.equal(made.length, 1);
  const real = made[0];
  assert.equal(real.ctx.tag, "ctx");
  // The last selection only, then the updates and the show, in order.
  assert.deepEqual(real.calls, [["select", "b"], ["update", "capture"], ["update", "lowering"],
    ["shown"]]);
  assert.equal(standIn.replacedBy, real.el);
  assert.equal(lazy.el, real.el);
  assert.equal(real.el.dataset.pane, "graph");
  assert.equal(real.el.hidden, true);
  assert.equal(lazy.real, real);
  assert.equal(lazy.filled, true);
  assert.deepEqual(ready, [real]);
  // Built once; later calls go straight to the pane.
  lazy.select("c");
  lazy.reset();
  await lazy.build();
  assert.equal(made.length, 1);
  assert.deepEqual(real.calls.slice(-2), [["select", "c"], ["reset"]]);
});

test("a reset before the pane is built drops what was queued", async () => {
  const { made, load } = fixture();
  const lazy = new LazyPane({}, { id: "graph", title: "Graph", load });
  lazy.select("a");
  lazy.reset();
  lazy.shown();
  await lazy.build();
  assert.deepEqual(made[0].calls, [["shown"]]);
});

test("prefetch imports the module without building the pane", async () => {
  const { made, loads, load, Pane } = fixture();
  const lazy = new LazyPane({}, { id: "graph", title: "Graph", load });
  assert.equal(await lazy.prefetch(), Pane);
  assert.equal(loads.n, 1);
  assert.equal(made.length, 0);
  assert.equal(lazy.real, null);
});

test("a tab whose module holds another pane fails loudly", async () => {
  const { load } = fixture("ir", "IR");
  const lazy = new LazyPane({}, { id: "graph", title: "Graph", load });
  const errors = [];
  const log = console.error;
  console.error = (...args) => errors.push(args);
  try {
    await assert.rejects(lazy.build(), /the tab graph \(Graph\) loaded ir \(IR\)/);
  } finally {
    console.error = log;
  }
  assert.equal(lazy.real, null);
  assert.equal(errors.length, 1);
});
