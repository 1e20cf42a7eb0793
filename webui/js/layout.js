// Page chrome that is not about the trace: tabs for the analysis panes, draggable column
// splitters (widths remembered across visits), and a short-lived toast message.

import { h } from "./dom.js";

export function makeTabs(nav, host, panes, onShow) {
  const buttons = new Map();
  const show = (id) => {
    for (const [pid, button] of buttons) {
      const on = pid === id;
      button.classList.toggle("active", on);
      button.setAttribute("aria-selected", String(on));
      panes.find((p) => p.id === pid).el.hidden = !on;
    }
    localStorage.setItem("ks.tab", id);
    onShow(panes.find((p) => p.id === id));
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
    // Marks the tabs whose pane has content.
    refresh() {
      for (const pane of panes) {
        buttons.get(pane.id).classList.toggle("filled", pane.el.dataset.filled === "true");
      }
    },
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
