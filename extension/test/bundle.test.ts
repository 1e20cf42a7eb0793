/** The shipped bundle, not the sources: dist/extension.js (what the .vsix holds) loads in
 * Node with `vscode` resolved to the stub, activates, and registers every command. */

import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import Module from "node:module";
import path from "node:path";
import * as vscodeStub from "./vscode-stub";
import { EXT } from "./helpers";

const bundle = path.join(EXT, "dist", "extension.js");

test("dist/extension.js activates against the vscode API and registers its commands", { skip: existsSync(bundle) ? false : "run `npm run build` first" }, () => {
  const loader = Module as unknown as { _load: (request: string, ...rest: unknown[]) => unknown };
  const original = loader._load;
  loader._load = (request: string, ...rest: unknown[]) => (request === "vscode" ? vscodeStub : original(request, ...rest));
  try {
    vscodeStub.stub.reset();
    const ext = require(bundle) as { activate(c: unknown): unknown; deactivate(): void };
    const context = vscodeStub.makeContext(EXT);
    ext.activate(context);
    const manifest = JSON.parse(readFileSync(path.join(EXT, "package.json"), "utf8"));
    assert.equal(manifest.main, "./dist/extension.js");
    assert.deepEqual([...vscodeStub.stub.commands.keys()].sort(),
      manifest.contributes.commands.map((c: { command: string }) => c.command).sort());
    ext.deactivate();
    for (const d of context.subscriptions) d.dispose();
  } finally {
    loader._load = original;
  }
});
