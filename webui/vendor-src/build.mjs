// Rebuilds webui/vendor/ from the packages pinned in package-lock.json.
//   cd webui/vendor-src && npm ci && npm run build
import { build } from "esbuild";
import { copyFileSync, readFileSync, writeFileSync } from "node:fs";

const out = new URL("../vendor/", import.meta.url);
const pkg = (name) => JSON.parse(readFileSync(`node_modules/${name}/package.json`, "utf8"));

await build({
  entryPoints: ["codemirror-entry.js"],
  bundle: true,
  format: "esm",
  minify: true,
  legalComments: "eof",
  outfile: new URL("codemirror.js", out).pathname,
});

// Both ship as self-contained ES modules (cytoscape-dagre carries dagre inside).
copyFileSync("node_modules/cytoscape/dist/cytoscape.esm.min.mjs",
             new URL("cytoscape.esm.min.js", out));
copyFileSync("node_modules/cytoscape-dagre/dist/cytoscape-dagre.min.mjs",
             new URL("cytoscape-dagre.min.js", out));

const names = ["@codemirror/state", "@codemirror/view", "@codemirror/language",
               "@codemirror/commands", "@codemirror/lang-python", "@lezer/highlight",
               "cytoscape", "cytoscape-dagre"];
const versions = Object.fromEntries(names.map((n) => [n, pkg(n).version]));
writeFileSync(new URL("VERSIONS.json", out), JSON.stringify(versions, null, 2) + "\n");
const licenses = names.map((n) => `== ${n} ${versions[n]} ==\n` +
  readFileSync(`node_modules/${n}/LICENSE`, "utf8").trim()).join("\n\n");
writeFileSync(new URL("LICENSES.txt", out), licenses + "\n");
console.log("webui/vendor rebuilt:", versions);
