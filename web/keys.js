// The keyboard beyond xterm.js's own: copy and paste that never send an
// interrupt by surprise, and the on-screen key bar (shown on narrow or touch
// screens) with Esc, Tab, a one-shot Ctrl and the arrows. Loaded after
// app.js, whose `term`, `send`, `encoder` and `copy` it uses.
"use strict";

const keys = (() => {
  // Copy and paste: Ctrl+C (or Cmd+C) with text selected copies it instead
  // of sending an interrupt; Ctrl+Shift+C copies; Ctrl+Shift+V is left to
  // the browser, whose paste event xterm.js sends as typed (bracketed if
  // the program asked).
  term.attachCustomKeyEventHandler((event) => {
    if (event.type !== "keydown") return true;
    const key = event.key.toLowerCase();
    const mod = event.ctrlKey || event.metaKey;
    if (mod && key === "c" && (event.shiftKey || term.hasSelection())) {
      if (term.hasSelection()) copy(term.getSelection());
      term.clearSelection();
      event.preventDefault();
      return false;
    }
    if (event.ctrlKey && event.shiftKey && key === "v") return false;
    return true;
  });

  // The key bar's Ctrl: the next text typed starts with its control character.
  let ctrlArmed = false;
  function armCtrl(on) {
    ctrlArmed = on;
    document.querySelector('#keys [data-key="ctrl"]').setAttribute("aria-pressed", String(on));
  }

  const arrow = (final) => (term.modes.applicationCursorKeysMode ? `\x1bO${final}` : `\x1b[${final}`);
  const SENDS = {
    esc: () => "\x1b",
    tab: () => "\t",
    up: () => arrow("A"),
    down: () => arrow("B"),
    right: () => arrow("C"),
    left: () => arrow("D"),
  };

  // Each key sends what the real one would, keeping the focus in the terminal.
  for (const button of document.querySelectorAll("#keys button")) {
    button.onmousedown = (event) => event.preventDefault();
    button.onclick = () => {
      const key = button.dataset.key;
      if (key === "ctrl") armCtrl(!ctrlArmed);
      else {
        armCtrl(false);
        send(encoder.encode(SENDS[key]()));
      }
      term.focus();
    };
  }

  return {
    // Typed text as sent: an armed Ctrl applies to its first character (a
    // soft keyboard may send a whole word at once).
    typed(data) {
      if (!ctrlArmed || data.length === 0) return data;
      armCtrl(false);
      const code = data[0].toUpperCase().charCodeAt(0);
      return code >= 0x40 && code <= 0x5f ? String.fromCharCode(code & 0x1f) + data.slice(1) : data;
    },
  };
})();
