// The error banner: an `error` event (or a failure to reach the server) shown with its
// kind, stage, message and source line; the traceback folded underneath. An error from
// the snippet's own process (`origin: "snippet"`) is marked so: its text is the snippet's
// to write, never the compiler's word.

import { h, clear } from "../dom.js";

export class ErrorBanner {
  constructor({ onLine }) {
    this.onLine = onLine;
    this.el = h("div.error-banner", { hidden: true, role: "alert" });
  }

  reset() {
    this.el.hidden = true;
    clear(this.el);
  }

  // `error`: an error payload, or a failure outside the stream ({kind, message}).
  /**
   * @param {Partial<import("../../types/events").Payloads["error"]>} error
   * @param {import("../../types/events").EventOf<"error">["origin"] | null} [origin]
   */
  show({ kind, stage, message, line, traceback, kernel }, origin = null) {
    this.el.hidden = false;
    this.el.classList.toggle("snippet-origin", origin === "snippet");
    clear(this.el,
      h("div.error-head",
        h("span.error-kind", kind ?? "error"),
        origin === "snippet" ? h("span.origin-tag", { title: SNIPPET_TITLE }, "from the snippet") : null,
        stage ? h("span.error-stage", `in ${stage}`) : null,
        kernel ? h("span.error-stage", `kernel ${kernel}`) : null,
        line ? h("a.error-line", { href: "#", onclick: (e) => { e.preventDefault(); this.onLine(line); } },
          `line ${line}`) : null,
        h("button.close", { title: "Dismiss", onclick: () => { this.el.hidden = true; } }, "×")),
      h("div.error-message", message ?? ""),
      traceback ? h("details", h("summary", "traceback"), h("pre", traceback)) : null);
  }
}

export const SNIPPET_TITLE = "Reported by the process that ran your snippet: the snippet could have written it";
