/**
 * Stands in for webui/js/api.js inside the webview (the build points that import here):
 * the webview has no network (CSP `default-src 'none'`), so the one API call a pane makes,
 * Pygments highlighting in codeview.js, goes to the extension host as a message and the
 * answer comes back as one. Same signature as api.js's `highlight`.
 */

import type { HostToWebview, WebviewToHost } from "../protocol";

type Post = (m: WebviewToHost) => void;

let post: Post = () => {};
let nextId = 1;
const waiting = new Map<number, (html: string | null) => void>();
const cache = new Map<string, Promise<string | null>>();

/** Wires the shim to the webview's postMessage (done once by main.ts). */
export function connectHighlight(p: Post): void {
  post = p;
}

/** Delivers a `highlighted` answer from the host. */
export function answerHighlight(m: Extract<HostToWebview, { type: "highlighted" }>): void {
  waiting.get(m.id)?.(m.html);
  waiting.delete(m.id);
}

/** Pygments HTML for `code`, or null when the host cannot highlight it (then it stays plain). */
export function highlight(code: string, language: string): Promise<string | null> {
  const key = `${language}\u0000${code}`;
  let p = cache.get(key);
  if (!p) {
    p = new Promise((resolve) => {
      const id = nextId++;
      waiting.set(id, resolve);
      post({ type: "highlight", id, code, language });
      setTimeout(() => { if (waiting.delete(id)) resolve(null); }, 10_000);
    });
    cache.set(key, p);
  }
  return p;
}
