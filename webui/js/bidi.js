// Bidirectional control characters (Trojan Source, CVE-2021-42574) made visible, as editors
// do: each is shown as a marker (⟨RLO⟩) in an element that isolates it (CSS `.bidi`,
// `unicode-bidi: isolate`), so it can no longer reorder the text around it. The character
// itself stays in the page, so copying a line copies what was written.

export const BIDI_NAMES = {
  "\u061c": "ALM", "\u200e": "LRM", "\u200f": "RLM", "\u202a": "LRE", "\u202b": "RLE",
  "\u202c": "PDF", "\u202d": "LRO", "\u202e": "RLO", "\u2066": "LRI", "\u2067": "RLI",
  "\u2068": "FSI", "\u2069": "PDI",
};
export const BIDI = /[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

// Escaped HTML (text nodes only carry characters; tags and attributes never hold these)
// with each bidi control wrapped in its marker.
export function markBidiHtml(html) {
  return html.replace(BIDI, (c) => {
    const name = BIDI_NAMES[c];
    const code = c.codePointAt(0).toString(16).toUpperCase().padStart(4, "0");
    return `<span class="bidi" data-bidi="${name}" title="U+${code} ${name}: a bidirectional ` +
      `control character">${c}</span>`;
  });
}
