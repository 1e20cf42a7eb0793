// The graph layout's worker body, shared by the page's module worker (layout.worker.js) and
// the VS Code panel's bundled one (extension/src/webview/layout.worker.ts): dagre (through
// cytoscape, headless) places the nodes it is sent and answers their positions.

const SIZE = [{ selector: "node", style: { width: "data(w)", height: "data(hgt)" } }];

/**
 * Answers each `{id, nodes, edges, options}` message `scope` receives with `{id, positions}`
 * (or `{id, error}`); `cytoscape` resolves to cytoscape with dagre registered.
 * @param {any} scope the worker's global scope
 * @param {Promise<any>} cytoscape
 */
export function serveLayouts(scope, cytoscape) {
  scope.onmessage = async ({ data: { id, nodes, edges, options } }) => {
    try {
      scope.postMessage({ id, positions: place(await cytoscape, nodes, edges, options) });
    } catch (err) {
      scope.postMessage({ id, error: String(err) });
    }
  };
}

function place(cytoscape, nodes, edges, options) {
  const elements = [
    ...nodes.map(([node, w, hgt]) => ({ group: "nodes", data: { id: node, w, hgt } })),
    ...edges.map(([source, target], i) =>
      ({ group: "edges", data: { id: `e${i}`, source, target } })),
  ];
  const cy = cytoscape({ headless: true, styleEnabled: true, elements, style: SIZE });
  cy.layout({ ...options, animate: false }).run();
  const positions = {};
  cy.nodes().forEach((n) => { positions[n.id()] = n.position(); });
  cy.destroy();
  return positions;
}
