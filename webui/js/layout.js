// Page chrome that is not about the trace: tabs for the analysis panes, draggable column
// splitters (widths remembered across visits), and a short-lived toast message.

import { h } from "./dom.js";

// Tabs for the analysis panes. A pane renders only when shown: every update waits (the
// trace and the stages seen, each once, in order) until its tab is first shown, and the
// visible pane's wait ends after the next frame, so the code pane (rendered by the page
// itself) paints first. `update`, `reset` and `select` go through the returned object.
export function makeTabs(nav, host, panes, onShow) {
  const buttons = new Map();
  const waiting = new Map(); // pane -> { trace, stages, selection } not yet rendered
  let visible = null;
  let scheduled = false;
  const refresh = () => {
    for (const pane of panes) {
      buttons.get(pane.id).classList.toggle("filled",
        pane.filled || waiting.has(pane));
    }
  };
  const flush = (pane) => {
    const wait = waiting.get(pane);
    if (!wait) return;
    waiting.delete(pane);
    for (const stage of wait.stages) pane.update(wait.trace, stage);
    if (wait.selection) pane.select(wait.selection);
  };
  const later = () => {
    if (scheduled) return;
    scheduled = true;
    const run = () => {
      if (!scheduled) return;
      scheduled = false;
      flush(visible);
      refresh();
    };
    requestAnimationFrame(() => setTimeout(run, 0));
    setTimeout(run, 250); // a page that draws no frames (hidden) still renders
  };
  const show = (id) => {
    for (const [pid, button] of buttons) {
      const on = pid === id;
      button.classList.toggle("active", on);
      button.setAttribute("aria-selected", String(on));
      panes.find((p) => p.id === pid).el.hidden = !on;
    }
    localStorage.setItem("ks.tab", id);
    visible = panes.find((p) => p.id === id);
    flush(visible);
    onShow(visible);
  };
  for (const pane of panes) {
    const button = h("button.tab", { role: "tab", dataset: { tab: pane.id },
      onclick: () => show(pane.id) }, h("span.tab-dot"), pane.title);
    buttons.set(pane.id, button);
    nav.append(button);
    pane.el.dataset.pane = pane.id;
    host.append(pane.el);
  }
  const saved = localStorage.getItem("ks.tab");
  show(buttons.has(saved) ? saved : panes[0].id);
  return {
    show,
    get shown() { return visible; },
    // A stage's event for every pane, rendered when the pane is shown.
    update(trace, stage) {
      for (const pane of panes) {
        const wait = waiting.get(pane) ?? { trace, stages: [], selection: null };
        wait.trace = trace;
        if (!wait.stages.includes(stage)) wait.stages.push(stage);
        waiting.set(pane, wait);
      }
      later();
    },
    reset() {
      waiting.clear();
      for (const pane of panes) pane.reset();
    },
    select(selection) {
      for (const pane of panes) {
        if (waiting.has(pane)) waiting.get(pane).selection = selection;
        else pane.select(selection);
      }
    },
    // Marks the tabs whose pane has content, or content waiting for its first show.
    refresh,
  };
}

// `handle` sits between two grid columns; dragging it sets the CSS variable `name` on
// `grid` to the new width of the column before it, in pixels.
export function makeSplitter(handle, grid, name, { min = 220, onResize = () => {} } = {}) {
  const saved = localStorage.getItem(`ks.${name}`);
  if (saved) grid.style.setProperty(name, saved);
  handle.addEventListener("pointerdown", (down) => {
    down.preventDefault();
    handle.setPointerCapture(down.pointerId);
    const before = handle.previousElementSibling;
    const start = before.getBoundingClientRect().width;
    const move = (e) => {
      const width = Math.max(min, start + e.clientX - down.clientX);
      grid.style.setProperty(name, `${width}px`);
    };
    const up = () => {
      handle.removeEventListener("pointermove", move);
      localStorage.setItem(`ks.${name}`, grid.style.getPropertyValue(name));
      onResize();
    };
    handle.addEventListener("pointermove", move);
    handle.addEventListener("pointerup", up, { once: true });
  });
}

let toastTimer = null;
export function toast(message) {
  let el = document.querySelector(".toast");
  if (!el) {
    el = h("div.toast", { role: "status" });
    document.body.append(el);
  }
  el.textContent = message;
  el.classList.add("show");
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => el.classList.remove("show"), 2500);
}

// A "maximise" button in each column's head: the column takes the whole workspace until
// the button (or Escape) restores the layout.
export function makeMaximise(workspace, columns, onChange = () => {}) {
  const restore = () => {
    workspace.classList.remove("maximised");
    for (const col of columns) col.classList.remove("max");
    onChange();
  };
  for (const col of columns) {
    const head = col.querySelector(".col-head, .tabs");
    const button = h("button.maxbtn", { type: "button", title: "Maximise this pane (Escape restores)",
      "aria-label": "Maximise" }, "⤢");
    button.addEventListener("click", () => {
      const on = !col.classList.contains("max");
      restore();
      if (on) {
        workspace.classList.add("maximised");
        col.classList.add("max");
        onChange();
      }
    });
    head.append(button);
  }
  document.addEventListener("keydown", (e) => {
    if (e.key === "Escape" && workspace.classList.contains("maximised")) restore();
  });
}

// Light or dark, remembered across visits; dark until the user picks light.
export function initTheme(button) {
  const saved = localStorage.getItem("ks.theme");
  const apply = (theme) => {
    document.documentElement.dataset.theme = theme;
    button.textContent = theme === "light" ? "☾ dark" : "☀ light";
    button.title = `Switch to the ${theme === "light" ? "dark" : "light"} theme`;
  };
  apply(saved ?? "dark");
  button.addEventListener("click", () => {
    const next = document.documentElement.dataset.theme === "light" ? "dark" : "light";
    localStorage.setItem("ks.theme", next);
    apply(next);
  });
}

// The page's own not-found view (a mistyped permalink, an unknown path).
export function notFound(message) {
  document.body.classList.add("not-found");
  const view = h("section.not-found-view", { role: "alert" },
    h("h1", "Not found"), h("p", message),
    h("p", "Permalinks look like ", h("code", "/t/k3J9x0aQ2mP1"), "; a diff like ",
      h("code", "/diff/<a>/<b>"), "."),
    h("p", h("a", { href: "/" }, "Open the explorer")));
  document.querySelector(".workspace").replaceWith(view);
}
