// A tab whose pane module is imported when the tab is first shown, so the page's open
// fetches and runs only what the code pane needs (docs/perf.md: a model's permalink asked
// for ~40 modules before its first line of code could be drawn).
//
// It stands in the tab list for the pane it names, with the pane's `id` and `title`, and an
// empty element in its place. The first `update` or `shown` (the tabs call them on the
// tab's first show) imports the module; then the pane is built, its element takes the
// stand-in's place, and every call made meanwhile is replayed to it, in order. `select`
// alone never starts the import (a hidden tab only keeps the selection for later).
// `prefetch()` imports the module without building the pane, so a later first show does
// not wait for the network. The stand-in's element says `data-lazy="loading"` (tests wait
// for the real pane).

export class LazyPane {
  /**
   * @param {any} ctx the ctx every pane gets (pane.js)
   * @param {{ id: string, title: string, load: () => Promise<any> }} spec
   *   `load` answers a promise of the pane's class (a dynamic `import()`)
   * @param {(pane: any) => void} [onReady] told when the pane is built
   */
  constructor(ctx, { id, title, load }, onReady = () => {}) {
    this.ctx = ctx;
    this.id = id;
    this.title = title;
    this.load = load;
    this.onReady = onReady;
    this.el = document.createElement("div");
    this.el.className = "pane-body";
    this.el.dataset.lazy = "loading"; // until the real pane's element takes its place
    this.real = null;
    this.calls = [];
    this.building = null;
  }

  get filled() {
    return this.real?.filled ?? false;
  }

  prefetch() {
    return this.load();
  }

  update(trace, stage) {
    this.call("update", [trace, stage], true);
  }

  select(selection) {
    this.call("select", [selection], false);
  }

  shown() {
    this.call("shown", [], true);
  }

  reset() {
    if (this.real) this.real.reset();
    else this.calls = [];
  }

  call(name, args, start) {
    if (this.real) {
      this.real[name](...args);
      return;
    }
    // Only the last selection matters: a hover over the page would queue one per move.
    if (name === "select") this.calls = this.calls.filter(([n]) => n !== "select");
    this.calls.push([name, args]);
    if (start) this.build();
  }

  build() {
    this.building ??= this.load().then((Pane) => {
      const real = new Pane(this.ctx);
      if (real.id !== this.id || real.title !== this.title) {
        throw new Error(`the tab ${this.id} (${this.title}) loaded ${real.id} (${real.title})`);
      }
      real.el.dataset.pane = this.id;
      real.el.hidden = this.el.hidden;
      this.el.replaceWith(real.el);
      this.el = real.el;
      this.real = real;
      const calls = this.calls;
      this.calls = [];
      for (const [name, args] of calls) real[name](...args);
      this.onReady(real);
    });
    this.building.catch((err) => console.error(`the ${this.id} pane failed to load`, err));
    return this.building;
  }
}
