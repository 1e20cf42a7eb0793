/** The layout worker's bundled script (src/webview/layout.worker.ts), as text (build.mjs). */
declare module "layout-worker-source" {
  const source: string;
  export default source;
}
