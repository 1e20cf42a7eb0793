// The page's globals, for the type check of webui/js (webui/tsconfig.json).

interface Window {
  /** What main.js and diffpage.js expose to the browser tests (tests/browser). */
  kernelscope: any;
}
