// Graph layout in a Web Worker (layout.worker.js), so a model's graph never blocks the
// page: `layoutOffThread(elements, options)` answers a promise of node positions by id.
// It rejects where no worker can start (a Content-Security-Policy without `worker-src`,
// a webview): the graph pane then lays out on the page, as before.

let worker = null;
let next = 0;
const waiting = new Map();

function start() {
  worker = new Worker(new URL("./layout.worker.js", import.meta.url), { type: "module" });
  worker.onmessage = ({ data }) => {
    const job = waiting.get(data.id);
    waiting.delete(data.id);
    if (data.error) job?.reject(new Error(data.error));
    else job?.resolve(data.positions);
  };
  worker.onerror = (e) => {
    e.preventDefault?.();
    for (const job of waiting.values()) job.reject(new Error("layout worker failed"));
    waiting.clear();
    worker = "failed";
  };
}

/** @param {any[]} elements cytoscape elements (nodes with data.w, data.hgt) */
export function layoutOffThread(elements, options) {
  if (worker === null) {
    try {
      start();
    } catch (err) {
      worker = "failed";
    }
  }
  if (worker === "failed") return Promise.reject(new Error("no layout worker"));
  const nodes = elements.filter((e) => e.group === "nodes").map((e) => [e.data.id, e.data.w, e.data.hgt]);
  const edges = elements.filter((e) => e.group === "edges").map((e) => [e.data.source, e.data.target]);
  const id = next++;
  return new Promise((resolve, reject) => {
    waiting.set(id, { resolve, reject });
    /** @type {Worker} */ (worker).postMessage({ id, nodes, edges, options });
  });
}
