// Loads cytoscape from its CDN, falling back to the vendored copy when the CDN cannot be
// reached (offline, blocked, slow), and registers the dagre layout, which is vendored only.

const CYTOSCAPE_VERSION = "3.35.0";
export const CYTOSCAPE_CDN =
  `https://cdn.jsdelivr.net/npm/cytoscape@${CYTOSCAPE_VERSION}/dist/cytoscape.esm.min.mjs`;
const CYTOSCAPE_VENDOR = "/webui/vendor/cytoscape.esm.min.js";
const DAGRE_VENDOR = "/webui/vendor/cytoscape-dagre.min.js";
const CDN_TIMEOUT_MS = 4000;

let loading = null;
export const libInfo = { cytoscape: null };

function withTimeout(promise, ms) {
  return Promise.race([
    promise,
    new Promise((_, reject) => setTimeout(() => reject(new Error("CDN timeout")), ms)),
  ]);
}

async function load() {
  let mod;
  try {
    mod = await withTimeout(import(CYTOSCAPE_CDN), CDN_TIMEOUT_MS);
    libInfo.cytoscape = "cdn";
  } catch (err) {
    console.info(`cytoscape CDN unavailable (${err.message}); using the vendored copy`);
    mod = await import(CYTOSCAPE_VENDOR);
    libInfo.cytoscape = "vendor";
  }
  const cytoscape = mod.default;
  const dagre = (await import(DAGRE_VENDOR)).default;
  cytoscape.use(dagre);
  return cytoscape;
}

// The cytoscape factory, with the dagre layout registered.
export function loadCytoscape() {
  loading ??= load();
  return loading;
}
