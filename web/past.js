// The terminal's past output above its screen (issue 49): a view over the
// raw bytes the program printed, laid over the terminal while the person
// reads it. xterm.js holds the screen and what came since the attach; the
// past is never parsed into it (xterm.js parses ~1 MB/s on a loaded
// machine: a 100,000-line history took 2.6 s, and 1,000,000 lines would
// not fit its buffer). Instead the bytes come in pages (the attach's
// `{"type":"history","before","max"}`: the stream's ring, then the kept
// history on disk, never capture-pane) and only the rows in view are
// drawn, so the scrollbar spans the whole history as soon as the first
// page says where it starts, and a page loads where the person scrolls.
//
// Each line is drawn as a log viewer draws it: its text and SGR colours,
// CR and backspace overwrite, other control sequences dropped, wrapped at
// the terminal's width. A full-screen program's redraws (cursor moves) are
// not replayed: what they printed shows as its text.
"use strict";

window.pastView = (() => {
  const PAGE = 256 << 10; // bytes a page asks for: ~9,000 lines of a log
  const SLACK = 64 << 10; // a page ahead overlaps the one before it by this
  const FIRST = 64 << 10; // the page asked for right after the first paint
  const MAX_SPACE = 15e6; // px: under every browser's element height limit
  const MAX_PAGE = 4 << 20; // what serve answers at most (src/attach/history.rs)

  // xterm.js's default palette (the theme's colours win).
  const ANSI = ["#000000", "#cd3131", "#0dbc79", "#e5e510", "#2472c8", "#bc3fbc", "#11a8cd", "#e5e5e5",
    "#666666", "#f14c4c", "#23d18b", "#f5f543", "#3b8eea", "#d670d6", "#29b8db", "#e5e5e5"];
  const NAMES = ["black", "red", "green", "yellow", "blue", "magenta", "cyan", "white"];

  function palette(theme) {
    const out = ANSI.slice();
    if (theme) {
      NAMES.forEach((name, i) => {
        if (theme[name]) out[i] = theme[name];
        const bright = `bright${name[0].toUpperCase()}${name.slice(1)}`;
        if (theme[bright]) out[i + 8] = theme[bright];
      });
    }
    return out;
  }

  function color256(n, colors) {
    if (n < 16) return colors[n];
    if (n < 232) {
      const v = [0, 95, 135, 175, 215, 255];
      const i = n - 16;
      return `rgb(${v[Math.floor(i / 36)]},${v[Math.floor(i / 6) % 6]},${v[i % 6]})`;
    }
    const g = 8 + (n - 232) * 10;
    return `rgb(${g},${g},${g})`;
  }

  // One line's text as cells: [char, style] with overwrite semantics.
  // `style` is carried from the line before (SGR lasts past a line feed).
  function cellsOf(text, style, colors) {
    const chars = [];
    const styles = [];
    let col = 0;
    let s = style;
    const n = text.length;
    for (let i = 0; i < n; i++) {
      const c = text.charCodeAt(i);
      if (c === 0x1b) {
        const next = text[i + 1];
        if (next === "[") {
          let j = i + 2;
          while (j < n && (text.charCodeAt(j) < 0x40 || text.charCodeAt(j) > 0x7e)) j++;
          if (text[j] === "m") s = sgr(s, text.slice(i + 2, j), colors);
          i = j;
        } else if (next === "]" || next === "P" || next === "_" || next === "^" || next === "X") {
          // A string: to BEL or ST.
          let j = i + 2;
          while (j < n && text.charCodeAt(j) !== 7 && !(text.charCodeAt(j) === 0x1b && text[j + 1] === "\\")) j++;
          i = text.charCodeAt(j) === 7 ? j : j + 1;
        } else if (next === "(" || next === ")" || next === "#" || next === "%") {
          i += 2;
        } else {
          i += 1;
        }
        continue;
      }
      if (c === 0x0d) { col = 0; continue; }
      if (c === 0x08) { if (col > 0) col--; continue; }
      if (c === 0x09) {
        const to = (Math.floor(col / 8) + 1) * 8;
        while (col < to) { if (col >= chars.length) { chars.push(" "); styles.push(s); } col++; }
        continue;
      }
      if (c < 0x20 || c === 0x7f) continue;
      let ch = text[i];
      if (c >= 0xd800 && c < 0xdc00 && i + 1 < n) ch += text[++i];
      while (chars.length < col) { chars.push(" "); styles.push(s); }
      chars[col] = ch;
      styles[col] = s;
      col++;
    }
    return { chars, styles, style: s };
  }

  const PLAIN = Object.freeze({ fg: null, bg: null, bold: false, dim: false, italic: false, underline: false, inverse: false });

  function sgr(style, params, colors) {
    const p = params === "" ? [0] : params.split(/[;:]/).map((x) => Number(x) || 0);
    let s = { ...style };
    for (let i = 0; i < p.length; i++) {
      const v = p[i];
      if (v === 0) s = { ...PLAIN };
      else if (v === 1) s.bold = true;
      else if (v === 2) s.dim = true;
      else if (v === 3) s.italic = true;
      else if (v === 4) s.underline = true;
      else if (v === 7) s.inverse = true;
      else if (v === 22) { s.bold = false; s.dim = false; }
      else if (v === 23) s.italic = false;
      else if (v === 24) s.underline = false;
      else if (v === 27) s.inverse = false;
      else if (v >= 30 && v <= 37) s.fg = colors[v - 30];
      else if (v >= 90 && v <= 97) s.fg = colors[v - 82];
      else if (v === 39) s.fg = null;
      else if (v >= 40 && v <= 47) s.bg = colors[v - 40];
      else if (v >= 100 && v <= 107) s.bg = colors[v - 92];
      else if (v === 49) s.bg = null;
      else if (v === 38 || v === 48) {
        let c = null;
        if (p[i + 1] === 5) { c = color256(p[i + 2] & 255, colors); i += 2; }
        else if (p[i + 1] === 2) { c = `rgb(${p[i + 2] & 255},${p[i + 3] & 255},${p[i + 4] & 255})`; i += 4; }
        if (v === 38) s.fg = c; else s.bg = c;
      }
    }
    return s;
  }

  function css(s) {
    let fg = s.fg;
    let bg = s.bg;
    if (s.inverse) { fg = s.bg || "var(--past-bg)"; bg = s.fg || "var(--past-fg)"; }
    let out = "";
    if (fg) out += `color:${fg};`;
    if (bg) out += `background:${bg};`;
    if (s.bold) out += "font-weight:bold;";
    if (s.dim) out += "opacity:0.6;";
    if (s.italic) out += "font-style:italic;";
    if (s.underline) out += "text-decoration:underline;";
    return out;
  }

  const decoder = new TextDecoder();

  /**
   * The view. `deps`: `element` (the layer over the terminal), `term`
   * (xterm.js: its font, theme and width), `ask(before, max)` (sends a
   * history request), `closed()` (called when the person leaves the view).
   */
  function create({ element, term, ask, closed }) {
    const space = document.createElement("div");
    space.className = "past-space";
    const rowsBox = document.createElement("div");
    rowsBox.className = "past-rows";
    element.append(rowsBox, space);
    element.tabIndex = 0;

    const state = {
      stream: null,
      first: null, // the oldest offset any page can start at (the server says)
      end: null, // the view's end: the output offset when it was opened
      chunks: [], // loaded bytes: {from, to, bytes, starts}, sorted, disjoint
      asked: null, // the request in flight: {before, max}
      want: null, // where the view needs bytes next: {before, max}
      open: false,
      top: null, // the first row in view: {line, sub}
      atBottom: true,
      expected: -1, // the scrollTop the view set itself
      pages: 0, // pages received
      firstAt: null, // performance.now() when `first` was known
      rowH: 17,
      cache: new Map(), // line offset -> cells (the rows in view)
      stuck: new Set(), // offsets no page reaches (a line longer than a page): skipped
    };

    function reset(stream) {
      Object.assign(state, { stream, first: null, end: null, chunks: [], asked: null, want: null, top: null, firstAt: null, pages: 0 });
      state.cache.clear();
      state.stuck.clear();
      if (state.open) close();
    }

    function chunkAt(offset) {
      for (const c of state.chunks) if (c.from <= offset && offset < c.to) return c;
      return null;
    }

    function starts(bytes, from) {
      const out = [from];
      let i = bytes.indexOf(10);
      while (i !== -1) {
        if (i + 1 < bytes.length) out.push(from + i + 1);
        i = bytes.indexOf(10, i + 1);
      }
      return out;
    }

    function add(from, to, bytes) {
      let lo = from;
      let hi = to;
      let parts = [{ from, to, bytes }];
      const keep = [];
      for (const c of state.chunks) {
        if (c.to < lo || c.from > hi) keep.push(c);
        else { parts.push(c); lo = Math.min(lo, c.from); hi = Math.max(hi, c.to); }
      }
      let merged;
      if (parts.length === 1) merged = bytes;
      else {
        merged = new Uint8Array(hi - lo);
        // Older bytes first, newer ones over them: overlapping bytes are the same.
        parts.sort((a, b) => a.from - b.from);
        for (const p of parts) merged.set(p.bytes, p.from - lo);
      }
      keep.push({ from: lo, to: hi, bytes: merged, starts: starts(merged, lo) });
      keep.sort((a, b) => a.from - b.from);
      state.chunks = keep;
      state.cache.clear();
    }

    // The start of the line holding `offset` and its end (past its LF, or
    // the chunk's end), or null when its bytes are not loaded.
    function lineAt(offset) {
      const c = chunkAt(offset);
      if (!c) return null;
      const s = c.starts;
      let lo = 0;
      let hi = s.length - 1;
      while (lo < hi) {
        const mid = (lo + hi + 1) >> 1;
        if (s[mid] <= offset) lo = mid; else hi = mid - 1;
      }
      return { start: s[lo], end: lo + 1 < s.length ? s[lo + 1] : c.to, chunk: c, index: lo };
    }

    function cells(line) {
      let got = state.cache.get(line.start);
      if (got) return got;
      const c = line.chunk;
      let text = decoder.decode(c.bytes.subarray(line.start - c.from, line.end - c.from));
      if (text.endsWith("\n")) text = text.slice(0, -1);
      got = cellsOf(text, PLAIN, colors());
      const cols = Math.max(1, term.cols);
      got.rows = Math.max(1, Math.ceil(got.chars.length / cols));
      state.cache.set(line.start, got);
      return got;
    }

    let colorsOf = null;
    function colors() {
      if (!colorsOf) colorsOf = palette(term.options.theme);
      return colorsOf;
    }

    function avgLine() {
      let bytes = 0;
      let lines = 0;
      for (const c of state.chunks) { bytes += c.to - c.from; lines += c.starts.length; }
      return lines ? Math.max(1, bytes / lines) : 80;
    }

    function span() { return Math.max(1, state.end - state.first); }

    function layout() {
      const rows = Math.max(1, Math.ceil(span() / avgLine()));
      space.style.height = `${Math.min(MAX_SPACE, rows * state.rowH + element.clientHeight)}px`;
    }

    function visibleRows() { return Math.max(1, Math.floor(element.clientHeight / state.rowH)); }

    // The rows from `top` on: [{cells, sub}] or null where bytes are missing
    // (and then `state.want` says which).
    function rowsFrom(top, count) {
      const out = [];
      let offset = top.line;
      let sub = top.sub;
      while (out.length < count && offset < state.end) {
        const line = lineAt(offset);
        if (!line) {
          const next = state.stuck.has(offset) && state.chunks.find((c) => c.from > offset);
          if (next) { offset = next.from; sub = 0; continue; }
          need(offset, true);
          break;
        }
        // A line cut by its chunk's end (not at the view's end) needs the next page.
        if (line.end === line.chunk.to && line.end < state.end) need(line.end, true);
        const got = cells(line);
        for (let r = sub; r < got.rows && out.length < count; r++) out.push({ got, r });
        sub = 0;
        offset = line.end;
      }
      out.complete = offset >= state.end;
      return out;
    }

    // Asks for the bytes at `offset`: going forward (a page after it,
    // overlapping what is loaded) or back (the page ending there).
    function need(offset, forward) {
      if (state.want || state.asked) return;
      if (forward) {
        const before = Math.min(state.end, offset + PAGE);
        state.want = { before, max: before - Math.max(state.first ?? 0, offset - SLACK), at: offset };
      } else {
        state.want = { before: offset, max: PAGE };
      }
      pump();
    }

    function pump() {
      if (state.asked || !state.want) return;
      state.asked = state.want;
      state.want = null;
      ask(state.asked.before, state.asked.max);
    }

    /** A history frame and its bytes arrived. */
    function onPage(frame, bytes) {
      if (frame.stream !== state.stream) return;
      const asked = state.asked;
      state.asked = null;
      // A page ahead that did not reach back to what is loaded (a line
      // longer than the overlap): once more with all serve gives, then
      // that line's rest is skipped.
      if (asked && asked.at !== undefined && frame.from > asked.at && !state.want) {
        if (asked.max < MAX_PAGE) state.want = { before: asked.before, max: MAX_PAGE, at: asked.at };
        else state.stuck.add(asked.at);
      }
      state.pages += 1;
      if (state.first === null) state.firstAt = performance.now();
      state.first = frame.first;
      if (state.end === null) state.end = frame.to;
      if (bytes.length) add(frame.from, frame.to, bytes);
      settle();
      if (state.open) draw();
      pump();
    }

    /** The screen is painted from a snapshot at `offset`: fetch the newest page. */
    function prefetch(stream, offset) {
      if (stream === null || offset === null) return;
      if (stream !== state.stream) reset(stream);
      if (state.first !== null || state.asked) return;
      state.want = { before: offset, max: FIRST };
      pump();
    }

    // Moves `top` by `delta` rows (negative: up), through loaded lines;
    // stops where bytes are missing (asking for them).
    function move(delta) {
      const top = state.top;
      if (delta < 0) {
        let { line, sub } = top;
        let left = -delta;
        while (left > 0) {
          if (sub > 0) { const k = Math.min(sub, left); sub -= k; left -= k; continue; }
          if (line <= state.first) break;
          const prev = lineAt(line - 1);
          if (!prev) { need(line, false); break; }
          line = prev.start;
          sub = cells(prev).rows;
        }
        state.top = { line, sub };
      } else {
        // Not past the last full screen.
        const ahead = rowsFrom(top, delta + visibleRows());
        const steps = Math.max(0, Math.min(delta, ahead.length - visibleRows()));
        let { line, sub } = top;
        for (let k = 0; k < steps; k++) {
          const l = lineAt(line);
          if (sub + 1 < cells(l).rows) sub++; else { line = l.end; sub = 0; }
        }
        state.top = { line, sub };
        const after = rowsFrom(state.top, visibleRows() + 1);
        state.atBottom = after.complete && after.length <= visibleRows();
      }
    }

    // The top that shows the view's last rows.
    function bottomTop() {
      const want = visibleRows();
      let line = state.end;
      let rows = 0;
      let sub = 0;
      while (rows < want && line > state.first) {
        const prev = lineAt(line - 1);
        if (!prev) { need(line, false); break; }
        const n = cells(prev).rows;
        line = prev.start;
        if (rows + n > want) { sub = rows + n - want; rows = want; break; }
        rows += n;
      }
      return { line, sub };
    }

    function syncScroll() {
      const max = element.scrollHeight - element.clientHeight;
      const at = state.atBottom ? max : Math.round(((state.top.line - state.first) / span()) * max);
      state.expected = at;
      element.scrollTop = at;
    }

    function draw() {
      if (!state.open || state.first === null) return;
      if (!state.top || state.atBottom) state.top = bottomTop();
      const want = visibleRows();
      const rows = rowsFrom(state.top, want);
      const cols = Math.max(1, term.cols);
      let html = "";
      for (const { got, r } of rows) {
        html += "<div>";
        let run = "";
        let style = null;
        const end = Math.min(got.chars.length, (r + 1) * cols);
        for (let i = r * cols; i < end; i++) {
          if (got.styles[i] !== style) {
            if (run) html += span_(run, style);
            run = "";
            style = got.styles[i];
          }
          run += got.chars[i];
        }
        if (run) html += span_(run, style);
        html += "</div>";
      }
      for (let i = rows.length; i < want; i++) html += `<div class="past-wait">${i === rows.length && rowsMissing(rows, want) ? "loading…" : ""}</div>`;
      rowsBox.innerHTML = html;
      rowsBox.style.top = `${element.scrollTop}px`;
      view.shown = rows.map(({ got, r }) => got.chars.slice(r * cols, (r + 1) * cols).join(""));
    }

    function rowsMissing(rows, want) { return rows.length < want && (state.asked || state.want); }

    function span_(text, style) {
      const escaped = text.replace(/[&<>]/g, (c) => (c === "&" ? "&amp;" : c === "<" ? "&lt;" : "&gt;"));
      const s = style ? css(style) : "";
      return s ? `<span style="${s}">${escaped}</span>` : escaped;
    }

    function onScroll() {
      if (!state.open) return;
      if (Math.abs(element.scrollTop - state.expected) <= 1) { rowsBox.style.top = `${element.scrollTop}px`; return; }
      // The person dragged the scrollbar: the offset its place stands for.
      const max = Math.max(1, element.scrollHeight - element.clientHeight);
      const f = element.scrollTop / max;
      state.expected = element.scrollTop;
      if (f >= 0.999) { state.atBottom = true; state.top = null; draw(); return; }
      state.atBottom = false;
      const offset = Math.floor(state.first + f * span());
      const line = lineAt(offset);
      if (line) state.top = { line: line.start, sub: 0 };
      else {
        // Not loaded: the page around it, then its line.
        state.top = { line: offset, sub: 0, exact: false };
        state.want = null;
        const before = Math.min(state.end, offset + (PAGE * 3) / 4);
        state.want = { before, max: PAGE };
        if (!state.asked) pump();
      }
      draw();
    }

    function onWheel(event) {
      if (!state.open) return;
      event.preventDefault();
      const unit = event.deltaMode === 1 ? 1 : event.deltaMode === 2 ? visibleRows() : 1 / state.rowH;
      let delta = Math.round(event.deltaY * unit);
      if (delta === 0) delta = Math.sign(event.deltaY);
      scrollRows(delta);
    }

    function scrollRows(delta) {
      if (delta > 0 && state.atBottom) { close(); return; }
      if (state.atBottom) { state.top = bottomTop(); state.atBottom = false; }
      if (state.top && state.top.exact === false) return;
      move(delta);
      syncScroll();
      draw();
    }

    function onKey(event) {
      if (!state.open) return;
      const page = visibleRows() - 1;
      const keys = { PageUp: -page, PageDown: page, ArrowUp: -1, ArrowDown: 1 };
      if (event.key in keys) { event.preventDefault(); scrollRows(keys[event.key]); return; }
      if (event.key === "Home") { event.preventDefault(); element.scrollTop = 0; return; }
      if (event.key === "End" || event.key === "Escape") { event.preventDefault(); close(); return; }
      if (event.key.length === 1 && !event.ctrlKey && !event.metaKey) close();
    }

    // A page whose line was asked for by a drag: once loaded, the top
    // becomes the line holding that offset.
    function settle() {
      if (state.top && state.top.exact === false && !state.asked && !state.want) {
        const line = lineAt(state.top.line);
        const next = line ? null : state.chunks.find((c) => c.from > state.top.line);
        if (line) state.top = { line: line.start, sub: 0 };
        else if (next) state.top = { line: next.from, sub: 0 };
      }
    }

    /** Whether there is anything above the screen to show. */
    function available() { return state.first !== null && state.end !== null; }

    /** Opens the view at its bottom, its end the output offset `now`. */
    function open(now) {
      if (!available() || state.open) return false;
      if (now !== null && now > state.end) state.end = now;
      state.open = true;
      state.atBottom = true;
      state.top = null;
      colorsOf = null;
      const size = term.options.fontSize || 15;
      element.style.fontSize = `${size}px`;
      element.style.fontFamily = term.options.fontFamily || "monospace";
      state.rowH = Math.ceil(size * (term.options.lineHeight || 1) * 1.2);
      element.style.setProperty("--past-row", `${state.rowH}px`);
      const theme = term.options.theme || {};
      element.style.setProperty("--past-bg", theme.background || "#000");
      element.style.setProperty("--past-fg", theme.foreground || "#fff");
      element.hidden = false;
      layout();
      element.scrollTop = element.scrollHeight;
      state.expected = element.scrollTop;
      element.focus();
      draw();
      return true;
    }

    function close() {
      if (!state.open) return;
      state.open = false;
      element.hidden = true;
      rowsBox.innerHTML = "";
      closed();
    }

    // The window resized while the view is open: its height (rows in
    // view) and the terminal's width (where lines wrap) changed, so each
    // line's rows are counted again and the view redrawn where it was (at
    // its bottom, or at the same line). The box's observer catches a
    // height-only change; the terminal's resize (the fit, a frame later)
    // the new width.
    function resized() {
      if (!state.open) return;
      state.cache.clear();
      layout();
      if (!state.top) state.atBottom = true;
      if (state.atBottom) state.top = null;
      else state.top = { ...state.top, sub: 0 };
      syncScroll();
      draw();
    }
    new ResizeObserver(resized).observe(element);
    term.onResize(resized);

    element.addEventListener("scroll", onScroll);
    element.addEventListener("wheel", onWheel, { passive: false });
    element.addEventListener("keydown", onKey);

    const view = {
      state,
      shown: [], // the rows drawn, as text (for tests)
      reset,
      prefetch,
      onPage,
      available,
      open,
      close,
      scrollRows,
      /** Drags the scrollbar to fraction `f` (0: the top), as a person does. */
      drag(f) {
        element.scrollTop = f * (element.scrollHeight - element.clientHeight);
        onScroll();
      },
      /** The connection changed: a request in flight is asked again. */
      reconnected() { if (state.asked) { state.want = state.want || state.asked; state.asked = null; } pump(); },
    };
    return view;
  }

  return { create, cellsOf, PLAIN };
})();
