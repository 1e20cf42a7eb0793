// Graph layout in a Web Worker (layout.worker.js), so a model's graph never blocks the
// page: `layoutOffThread(elements, options)` answers a promise of node positions by id.
// It rejects where no worker can start (a Content-Security-Policy without `worker-src`):
// the graph pane then lays out on the page, as before. The VS Code panel starts its own
// worker (a bundled script) through `layoutWith`.

/**
 * A layout function over the worker `makeWorker` starts on first use; `onFail(reason)` is
 * told once when it cannot start or fails (every layout after that rejects).
 * @param {() => Worker} makeWorker
 * @param {(reason: string) => void} [onFail]
 */
export function layoutWith(makeWorker, onFail = () => {}) {
  /** @type {Worker | "failed" | null} */
  let worker = null;
  let next = 0;
  const waiting = new Map();
  const fail = (reason) => {
    for (const job of waiting.values()) job.reject(new Error(reason));
    waiting.clear();
    worker = "failed";
    onFail(reason);
  };
  const start = () => {
    const w = makeWorker();
    w.onmessage = ({ data }) => {
      const job = waiting.get(data.id);
      waiting.delete(data.id);
      if (data.error) job?.reject(new Error(data.error));
      else job?.resolve(data.positions);
    };
    w.onerror = (e) => {
      e.preventDefault?.();
      fail(`layout worker failed${e.message ? `: ${e.message}` : ""}`);
    };
    return w;
  };
  /** @param {any[]} elements cytoscape elements (nodes with data.w, data.hgt) */
  return (elements, options) => {
    if (worker === null) {
      try {
        worker = start();
      } catch (err) {
        fail(`no layout worker: ${err}`);
      }
    }
    if (worker === "failed" || worker === null) {
      return Promise.reject(new Error("no layout worker"));
    }
    const nodes = elements.filter((e) => e.group === "nodes")
      .map((e) => [e.data.id, e.data.w, e.data.hgt]);
    const edges = elements.filter((e) => e.group === "edges")
      .map((e) => [e.data.source, e.data.target]);
    const id = next++;
    const running = worker;
    return new Promise((resolve, reject) => {
      waiting.set(id, { resolve, reject });
      running.postMessage({ id, nodes, edges, options });
    });
  };
}

export const layoutOffThread = layoutWith(
  () => new Worker(new URL("./layout.worker.js", import.meta.url), { type: "module" }));
