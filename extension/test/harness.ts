/** What the tests that drive the whole extension share: a fresh activation against the
 * vscode stub for each test, a fake server a test may start (closed after it), and what
 * the panel and the status bar were given. */

import { beforeEach, afterEach } from "node:test";
import * as vscode from "vscode";
import { stub, makeContext, WebviewPanel } from "./vscode-stub";
import { activate } from "../src/extension";
import { KernelscopePanel } from "../src/panel";
import type { Session } from "../src/session";
import { EXT, FakeServer, fakeServer } from "./helpers";

export interface Harness {
  /** The fake server of the running test (after `start`). */
  srv: FakeServer;
  session: Session;
  context: ReturnType<typeof makeContext>;
  /** Starts a fake server and points the settings at it (never starting one). */
  start(opts?: Parameters<typeof fakeServer>[0]): Promise<FakeServer>;
  /** The last panel created. */
  panel(): WebviewPanel;
  /** The messages of one type posted to a panel's webview. */
  posted(type: string, panel?: WebviewPanel): { type: string }[];
  /** Every status bar item's text. */
  statusText(): string;
}

/** Registers the per-test activation and clean-up; call once at a test file's top level. */
export function harness(): Harness {
  let srv: FakeServer | undefined;
  const h = {
    get srv(): FakeServer {
      if (!srv) throw new Error("no fake server started");
      return srv;
    },
    async start(opts: Parameters<typeof fakeServer>[0] = {}) {
      srv = await fakeServer(opts);
      stub.settings["kernelscope.serverUrl"] = srv.url;
      stub.settings["kernelscope.startServer"] = false;
      return srv;
    },
    panel: () => stub.panels[stub.panels.length - 1],
    posted: (type: string, panel = h.panel()) => (panel.webview.posted as { type: string }[]).filter((m) => m.type === type),
    statusText: () => stub.statusItems.map((i) => i.text).join(" | "),
  } as Harness;
  beforeEach(() => {
    stub.reset();
    KernelscopePanel.current = null;
    h.context = makeContext(EXT);
    h.session = activate(h.context as unknown as vscode.ExtensionContext);
  });
  afterEach(async () => {
    for (const d of h.context.subscriptions) d.dispose();
    await srv?.close();
    srv = undefined;
  });
  return h;
}
