// Builds the extension with esbuild:
//   dist/extension.js   the extension host (CommonJS, Node; `vscode` left to VS Code)
//   dist/webview.js     the panel script: webui/js's panes bundled with src/webview/main.ts,
//                       and the graph layout's worker (src/webview/layout.worker.ts) as text
//   dist/webview.css    webui/css plus media/webview.css
//   out/html.cjs        the panel's HTML renderer, for the browser test
//   out/test/*.cjs      with --tests: the unit tests, `vscode` replaced by test/vscode-stub.ts
// The web UI's api.js is replaced in the webview by src/webview/highlight.ts (no network
// there); every other webui module is bundled as it is.
import * as esbuild from "esbuild";
import { readdirSync, copyFileSync, mkdirSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const webui = path.resolve(here, "../webui");
const tests = process.argv.includes("--tests");
const watch = process.argv.includes("--watch");

const webuiApi = {
  name: "webui-api-in-webview",
  setup(build) {
    build.onResolve({ filter: /\/api\.js$/ }, (args) => {
      const target = path.resolve(args.resolveDir, args.path);
      if (target === path.join(webui, "js", "api.js")) {
        return { path: path.join(here, "src", "webview", "highlight.ts") };
      }
      return undefined;
    });
  },
};

// `import source from "layout-worker-source"`: the layout worker bundled on its own (a
// classic script: the panel starts it from a Blob URL, where it can import nothing), as text.
const layoutWorker = {
  name: "layout-worker-source",
  setup(build) {
    build.onResolve({ filter: /^layout-worker-source$/ }, () => ({ path: "layout-worker", namespace: "worker" }));
    build.onLoad({ filter: /.*/, namespace: "worker" }, async () => {
      const out = await esbuild.build({ ...common, entryPoints: ["src/webview/layout.worker.ts"],
        write: false, platform: "browser", format: "iife", target: "chrome120", minify: true,
        metafile: true });
      return { contents: out.outputFiles[0].text, loader: "text",
        watchFiles: Object.keys(out.metafile.inputs).map((f) => path.resolve(here, f)) };
    });
  },
};

const common = { bundle: true, logLevel: "warning", sourcemap: false, legalComments: "none" };
const builds = [
  { ...common, entryPoints: ["src/extension.ts"], outfile: "dist/extension.js", platform: "node",
    format: "cjs", target: "node20", external: ["vscode"] },
  { ...common, entryPoints: ["src/webview/main.ts"], outfile: "dist/webview.js", platform: "browser",
    format: "iife", target: "chrome120", plugins: [webuiApi, layoutWorker], minify: true,
    // graphlayout.js's page worker (a module beside it) is never started in the webview.
    define: { "import.meta.url": "undefined" } },
  { ...common, entryPoints: ["src/webview/style.css"], outfile: "dist/webview.css", minify: true },
  { ...common, entryPoints: ["src/html.ts"], outfile: "out/html.cjs", platform: "node", format: "cjs",
    target: "node20" },
];
if (tests) {
  const files = readdirSync(path.join(here, "test")).filter((f) => f.endsWith(".test.ts"));
  builds.push({ ...common, entryPoints: files.map((f) => `test/${f}`), outdir: "out/test",
    outExtension: { ".js": ".cjs" }, platform: "node", format: "cjs", target: "node20",
    alias: { vscode: "./test/vscode-stub.ts" } });
}

if (watch) {
  for (const b of builds) await (await esbuild.context(b)).watch();
} else {
  await Promise.all(builds.map((b) => esbuild.build(b)));
  mkdirSync(path.join(here, "dist"), { recursive: true });
  copyFileSync(path.join(webui, "vendor", "LICENSES.txt"), path.join(here, "dist", "THIRD-PARTY-LICENSES.txt"));
}
