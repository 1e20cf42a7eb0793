/**
 * The panel's graph tabs and a big stored trace's parts, as webui/js/main.js has them: a
 * trace of several graphs (forward and backward, graph breaks) shows one graph or all, and a
 * big stored trace (docs/server.md, "A model's trace") holds each graph in a part that the
 * webview asks the host for (the `part` messages of protocol.ts) when the graph is shown.
 */

import type { HostToWebview, Json, TracePart, WebviewToHost } from "../protocol";
import { fromJson } from "../protocol";
import { graphLabels } from "../../../webui/js/trace.js";

type PartAnswer = Extract<HostToWebview, { type: "part" }>;
type Waiter = { resolve: (part: TracePart) => void; reject: (err: Error) => void };

/** Parts asked of the host, each once while it is on its way. */
export class PartRequests {
  private waiting = new Map<string, Waiter[]>();
  /** Parts the host sent with the trace (JSON text), by `trace/key`, until asked for. */
  private given = new Map<string, Json>();

  constructor(private readonly post: (m: WebviewToHost) => void) {}

  /** The parts a `trace` message brought (they replace any a former trace brought). */
  give(trace: string, parts: Record<string, Json>): void {
    this.given = new Map(Object.entries(parts).map(([key, text]) => [`${trace}/${key}`, text]));
  }

  ask(trace: string, key: string): Promise<TracePart> {
    const text = this.given.get(`${trace}/${key}`);
    this.given.delete(`${trace}/${key}`);
    // A given part is parsed in a task of its own, as an answer message is: the trace
    // message's task (the head) and this one (the part, then the panes) stay apart.
    if (text !== undefined) return new Promise((resolve) => setTimeout(() => resolve(this.parsed(trace, key, text)), 0));
    return this.asked(trace, key);
  }

  /** A given part's text parsed; one that is not a part is asked for as if not given. */
  private parsed(trace: string, key: string, text: Json): TracePart | Promise<TracePart> {
    try {
      const part = fromJson<TracePart>(text);
      if (part && typeof part === "object") return part;
    } catch { /* asked for below */ }
    return this.asked(trace, key);
  }

  private asked(trace: string, key: string): Promise<TracePart> {
    return new Promise((resolve, reject) => {
      const id = `${trace}/${key}`;
      const waiters = this.waiting.get(id);
      if (waiters) {
        waiters.push({ resolve, reject });
        return;
      }
      this.waiting.set(id, [{ resolve, reject }]);
      this.post({ type: "part", trace, key });
    });
  }

  answer(m: PartAnswer): void {
    const id = `${m.trace}/${m.key}`;
    const waiters = this.waiting.get(id) ?? [];
    this.waiting.delete(id);
    let part: TracePart | null = null;
    try {
      part = m.part === null ? null : fromJson<TracePart>(m.part);
    } catch { /* not JSON: as if not read */ }
    const error = new Error(m.error ?? `part ${m.key} could not be read`);
    for (const w of waiters) {
      if (part && typeof part === "object") w.resolve(part);
      else w.reject(error);
    }
  }
}

/** "graphs: all, forward 0, backward 1": shown when a trace has more than one graph. */
export class GraphTabs {
  readonly el = document.createElement("nav");

  constructor(private readonly choose: (ids: number[] | null) => void) {
    this.el.className = "graph-tabs";
    this.el.hidden = true;
  }

  render(trace: unknown, shown: number[] | null): void {
    const labels = graphLabels(trace as never) as Array<{ id: number; label: string; title: string }>;
    this.el.replaceChildren();
    this.el.hidden = labels.length < 2;
    if (this.el.hidden) return;
    const head = document.createElement("span");
    head.className = "hint";
    head.textContent = "graphs:";
    this.el.append(head, this.button(null, "all", "every graph", shown),
      ...labels.map((g) => this.button([g.id], g.label, g.title, shown)));
  }

  private button(ids: number[] | null, text: string, title: string, shown: number[] | null): HTMLButtonElement {
    const b = document.createElement("button");
    b.className = "gtab";
    b.textContent = text;
    b.title = title;
    b.dataset.graphs = ids ? ids.join(",") : "all";
    b.classList.toggle("active", JSON.stringify(ids) === JSON.stringify(shown));
    b.addEventListener("click", () => this.choose(ids));
    return b;
  }
}
