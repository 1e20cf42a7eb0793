// The graph pane's layout, off the page's main thread (layoutjob.js). Loaded as a module
// worker by graphlayout.js; the page draws the graph with these positions (a `preset` layout).

import { serveLayouts } from "./layoutjob.js";

// Imported by name at run time, as libs.js does: the type check of js/ stays out of them.
const CYTOSCAPE = "../vendor/cytoscape.esm.min.js";
const DAGRE = "../vendor/cytoscape-dagre.min.js";
const ready = Promise.all([import(CYTOSCAPE), import(DAGRE)]).then(([cy, dagre]) => {
  cy.default.use(dagre.default);
  return cy.default;
});

serveLayouts(self, ready);
