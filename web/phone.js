// The page on a phone: the terminal list is a drawer (the title bar's ☰
// opens it; choosing a terminal, spawning one or tapping beside it closes
// it), the page is as tall as the visual viewport (the on-screen keyboard
// shrinks it, so the key bar and the cursor's row stay above the
// keyboard), and the terminal is re-fitted whenever its box changes size
// (the key bar appearing, the keyboard, a rotation, the drawer), so no row
// is ever drawn outside it. Loaded after app.js, whose `$` and `fit` it uses.
"use strict";

(() => {
  const body = document.body;
  function drawer(open) {
    body.classList.toggle("drawer-open", open);
    $("drawer").setAttribute("aria-expanded", String(open));
  }
  $("drawer").onclick = () => drawer(!body.classList.contains("drawer-open"));
  $("drawer-shade").onclick = () => drawer(false);
  // An entry's own actions (rename, kill) stop their clicks: those keep it open.
  $("terminals").addEventListener("click", (event) => {
    if (event.target.closest("li")) drawer(false);
  });
  $("new").addEventListener("click", () => drawer(false));
  $("spawn").addEventListener("submit", () => drawer(false));

  // The visual viewport is what is left above the on-screen keyboard.
  const visual = window.visualViewport;
  function viewport() {
    if (!visual) return;
    // Pinch-zoomed, the visual viewport is a view into the page, not its size.
    if (visual.scale > 1.01) body.style.removeProperty("--vvh");
    else body.style.setProperty("--vvh", `${Math.round(visual.height)}px`);
    // The browser may have panned the page to show the focused text area.
    if (visual.offsetTop) window.scrollTo(0, 0);
  }
  if (visual) {
    visual.addEventListener("resize", viewport);
    visual.addEventListener("scroll", viewport);
  }
  viewport();

  // One fit per frame, whatever resized the box.
  let queued = false;
  new ResizeObserver(() => {
    if (queued) return;
    queued = true;
    requestAnimationFrame(() => {
      queued = false;
      fit.fit();
    });
  }).observe($("screen"));
  window.tmuxEngine.drawer = drawer;
})();
