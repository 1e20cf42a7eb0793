// Unit tests of webui/js/bidi.js (no browser): Trojan Source's bidirectional controls are
// marked where the UI shows code (issue 30: they were rendered reordered, unmarked).
//   node --test tests/browser/js/
import { test } from "node:test";
import assert from "node:assert/strict";

import { markBidiHtml, BIDI_NAMES } from "../../../webui/js/bidi.js";

test("every bidi control is wrapped in a named, isolating marker", () => {
  const line = 'access_level = "user\u202e \u2066// Check if admin\u2069 \u2066"';
  const html = markBidiHtml(line);
  const names = [...html.matchAll(/data-bidi="(\w+)"/g)].map((m) => m[1]);
  assert.deepEqual(names, ["RLO", "LRI", "PDI", "LRI"]);
  assert.equal(html.match(/<span class="bidi"/g).length, 4);
  // The characters themselves stay (copying a line copies what was written).
  assert.equal(html.replace(/<[^>]*>/g, ""), line);
});

test("all twelve controls are known and nothing else is touched", () => {
  assert.equal(Object.keys(BIDI_NAMES).length, 12);
  for (const c of Object.keys(BIDI_NAMES)) assert.match(markBidiHtml(c), /class="bidi"/);
  const plain = "x = a &lt; b  # ünïcödé, עברית, العربية";
  assert.equal(markBidiHtml(plain), plain);
});
