/**
 * The panel's graph layout worker: the web UI's worker body (webui/js/layoutjob.js) with
 * cytoscape and dagre bundled in, since a webview's worker can import nothing. Built as its
 * own script and carried in dist/webview.js as text, which the panel starts from a Blob URL
 * (its CSP allows `worker-src blob:`); see layoutWorker in main.ts.
 */

import cytoscape from "../../../webui/vendor/cytoscape.esm.min.js";
import dagre from "../../../webui/vendor/cytoscape-dagre.min.js";
import { serveLayouts } from "../../../webui/js/layoutjob.js";

cytoscape.use(dagre);
serveLayouts(self, Promise.resolve(cytoscape));
