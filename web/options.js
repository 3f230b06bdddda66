// The page's client options: font, theme, cursor, scrollback. Four layers,
// each checked against OPTIONS (the same table as src/bridge/page/options.rs
// checks `serve --page-option` with): the built-in defaults, the server's
// (`<meta name="tmux-engine-options">`), the person's own (localStorage,
// set in the Options panel), and the URL's query (`?fontSize=16&theme=light`),
// which wins for that load but is never saved.
"use strict";

const pageOptions = (() => {
  const OPTIONS = {
    fontSize: { integer: [6, 72], fallback: 14 },
    fontFamily: { text: true, fallback: 'ui-monospace, "DejaVu Sans Mono", "Cascadia Mono", Menlo, monospace' },
    theme: { words: ["dark", "light", "solarized"], fallback: "dark" },
    cursorStyle: { words: ["block", "underline", "bar"], fallback: "block" },
    cursorBlink: { words: ["true", "false"], fallback: true },
    scrollback: { integer: [0, 100000], fallback: 5000 },
    // OSC 52: a program putting text on the clipboard. `ask` shows a notice
    // with Allow (a click: the browser's own gesture rule holds too).
    clipboardWrite: { words: ["ask", "allow", "deny"], fallback: "ask" },
  };

  const THEMES = {
    dark: { background: "#111111", foreground: "#dddddd", cursor: "#dddddd", selectionBackground: "#44475a" },
    light: {
      background: "#fafafa", foreground: "#222222", cursor: "#222222", cursorAccent: "#fafafa",
      selectionBackground: "#c8d7f0", black: "#000000", red: "#c91b00", green: "#00a600",
      yellow: "#a68a00", blue: "#0225c7", magenta: "#b000b0", cyan: "#00a5a5", white: "#7f7f7f",
      brightBlack: "#555555", brightRed: "#e0301e", brightGreen: "#2bb42b", brightYellow: "#b3a000",
      brightBlue: "#3b5bdb", brightMagenta: "#c23bc2", brightCyan: "#1aa3a3", brightWhite: "#444444",
    },
    // Ethan Schoonover's Solarized (dark), the usual terminal mapping.
    solarized: {
      background: "#002b36", foreground: "#839496", cursor: "#93a1a1", cursorAccent: "#002b36",
      selectionBackground: "#073642", black: "#073642", red: "#dc322f", green: "#859900",
      yellow: "#b58900", blue: "#268bd2", magenta: "#d33682", cyan: "#2aa198", white: "#eee8d5",
      brightBlack: "#002b36", brightRed: "#cb4b16", brightGreen: "#586e75", brightYellow: "#657b83",
      brightBlue: "#839496", brightMagenta: "#6c71c4", brightCyan: "#93a1a1", brightWhite: "#fdf6e3",
    },
  };

  const STORE = "tmux-engine.options";

  // `value` (a string from a URL or form, or JSON's typed value) as the
  // option's value, or undefined when it is not one.
  function check(key, value) {
    const spec = OPTIONS[key];
    if (!spec || value === null || value === undefined) return undefined;
    const text = String(value);
    if (spec.integer) {
      if (!/^\d+$/.test(text)) return undefined;
      const n = Number(text);
      return n >= spec.integer[0] && n <= spec.integer[1] ? n : undefined;
    }
    if (spec.words) {
      if (!spec.words.includes(text)) return undefined;
      return text === "true" ? true : text === "false" ? false : text;
    }
    // eslint-disable-next-line no-control-regex
    return text.length >= 1 && text.length <= 200 && !/[\u0000-\u001f\u007f-\u009f]/.test(text) ? text : undefined;
  }

  function checked(object) {
    const out = {};
    for (const [key, value] of Object.entries(object || {})) {
      const good = check(key, value);
      if (good !== undefined) out[key] = good;
    }
    return out;
  }

  function fromMeta() {
    const meta = document.querySelector('meta[name="tmux-engine-options"]');
    try { return meta ? checked(JSON.parse(meta.content)) : {}; } catch { return {}; }
  }

  function fromStore() {
    try { return checked(JSON.parse(localStorage.getItem(STORE) || "{}")); } catch { return {}; }
  }

  function fromQuery() {
    const params = new URLSearchParams(location.search);
    const out = {};
    for (const key of Object.keys(OPTIONS)) {
      const good = check(key, params.get(key));
      if (good !== undefined) out[key] = good;
    }
    return out;
  }

  const builtin = Object.fromEntries(Object.entries(OPTIONS).map(([key, spec]) => [key, spec.fallback]));
  const server = fromMeta();
  const stored = fromStore();
  const query = fromQuery();

  return {
    keys: Object.keys(OPTIONS),
    check,
    // The options in force, and where each came from (for tests and the panel).
    current() { return { ...builtin, ...server, ...stored, ...query }; },
    source(key) {
      return key in query ? "url" : key in stored ? "saved" : key in server ? "server" : "default";
    },
    // The person's choice: saved, and it beats the URL's from now on.
    save(key, value) {
      const good = check(key, value);
      if (good === undefined) return false;
      stored[key] = good;
      delete query[key];
      try { localStorage.setItem(STORE, JSON.stringify(stored)); } catch { /* private mode: this load only */ }
      return true;
    },
    // What xterm.js takes for the options in force.
    terminal(options) {
      return {
        fontSize: options.fontSize,
        fontFamily: options.fontFamily,
        theme: THEMES[options.theme],
        cursorStyle: options.cursorStyle,
        cursorBlink: options.cursorBlink,
        scrollback: options.scrollback,
      };
    },
  };
})();
