// The graph pane's layout, off the page's main thread: dagre (through cytoscape, headless)
// places the nodes it is sent and answers their positions. Loaded as a module worker by
// graphlayout.js; the page draws the graph with these positions (a `preset` layout).

// Imported by name at run time, as libs.js does: the type check of js/ stays out of them.
const CYTOSCAPE = "../vendor/cytoscape.esm.min.js";
const DAGRE = "../vendor/cytoscape-dagre.min.js";
const ready = Promise.all([import(CYTOSCAPE), import(DAGRE)]).then(([cy, dagre]) => {
  cy.default.use(dagre.default);
  return cy.default;
});

const SIZE = [{ selector: "node", style: { width: "data(w)", height: "data(hgt)" } }];

self.onmessage = async ({ data: { id, nodes, edges, options } }) => {
  try {
    const cytoscape = await ready;
    const elements = [
      ...nodes.map(([node, w, hgt]) => ({ group: "nodes", data: { id: node, w, hgt } })),
      ...edges.map(([source, target], i) => ({ group: "edges", data: { id: `e${i}`, source, target } })),
    ];
    const cy = cytoscape({ headless: true, styleEnabled: true, elements, style: SIZE });
    cy.layout({ ...options, animate: false }).run();
    const positions = {};
    cy.nodes().forEach((n) => { positions[n.id()] = n.position(); });
    cy.destroy();
    self.postMessage({ id, positions });
  } catch (err) {
    self.postMessage({ id, error: String(err) });
  }
};
