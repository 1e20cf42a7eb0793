// webui/js/panes/modules.js: each module's counts, made in one pass, are what counting with
// provenance.js's `inModule` gives, on the 6-block training step (no browser):
//   node --test tests/browser/js/
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { gunzipSync } from "node:zlib";

import { Trace } from "../../../webui/js/trace.js";
import { buildIndex, inModule } from "../../../webui/js/provenance.js";
import { countsByModule } from "../../../webui/js/panes/modules.js";

const fixture = JSON.parse(gunzipSync(readFileSync(
  new URL("../fixtures/llama6_train.json.gz", import.meta.url))).toString());

test("each module's nodes, buffers and kernels, counted in one pass", () => {
  const trace = new Trace();
  for (const event of fixture.events) trace.add(event);
  const index = buildIndex(trace);
  const counts = countsByModule(index);
  const paths = ["", ...index.modules.keys()];
  assert.ok(paths.length > 30);
  for (const path of paths) {
    const within = (modules) => modules.some((m) => inModule(m, path));
    const expected = {
      nodes: index.nodes.filter((n) => inModule(n.module, path)).length,
      buffers: index.buffers.filter((b) => within(b.modules)).length,
      kernels: index.kernels.filter((k) => within(k.modules)).length,
    };
    assert.deepEqual(counts.get(path) ?? { nodes: 0, buffers: 0, kernels: 0 }, expected, path);
  }
  assert.ok(counts.get("").nodes > 1000);
});
