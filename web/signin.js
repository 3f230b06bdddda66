// Sign-in (src/bridge/signin/): who this page is, from a link's one-time
// code or the session kept in this origin's localStorage (app.js takes the
// code from the address bar and holds `session`), the panel that asks for
// a code, and the switch a link for another owner offers. Only
// declarations: it is loaded before app.js, whose state these use when
// called, and app.js wires the panel's form.
"use strict";
// The sign-in panel: why, and how to get in (a new link, or its code).
function signInPanel(why) {
  document.body.classList.add("signed-out");
  $("signin-why").textContent = why;
  $("signin").hidden = false;
}

// The session stopped working (serve restarted, the link was revoked).
function signedOut() {
  if (document.body.classList.contains("signed-out")) return;
  localStorage.removeItem(SESSION);
  session = null;
  view.ended = true;
  if (view.socket) { view.socket.onclose = null; view.socket.close(); }
  signInPanel("Your session ended (serve restarted, or the link was revoked).");
}

// "Signed in as A; this link is for B": a link someone sent must not
// silently sign the user in as them (and see what they type), so the new
// session waits for a click; declined, it is signed out at once.
function offerSwitch(current, next) {
  const notice = document.createElement("p");
  notice.id = "switch";
  notice.setAttribute("role", "alert");
  notice.textContent = `Signed in as ${current.owner}; this link is for ${next.owner}. `;
  const button = document.createElement("button");
  button.type = "button";
  button.textContent = `Switch to ${next.owner}`;
  button.onclick = () => {
    localStorage.setItem(SESSION, next.session);
    location.reload();
  };
  const keep = document.createElement("button");
  keep.type = "button";
  keep.className = "plain";
  keep.textContent = `Stay ${current.owner}`;
  keep.onclick = () => {
    api("DELETE", "/api/session", undefined, next.session).catch(() => {});
    notice.remove();
  };
  notice.append(button, keep);
  $("side").insertBefore(notice, $("terminals"));
}

// Exchanges `code` (a link's, or one pasted in the panel); the new
// session, or null when the code was used, expired or unknown.
async function exchange(code) {
  try {
    return await api("POST", "/api/sign-in", { code }, null);
  } catch (error) {
    return null;
  }
}

// Who this page is: a fresh code's session (asking first if another
// owner is signed in), else the kept session, else the sign-in panel.
async function signIn() {
  let code = takeCode();
  // Another node's link: its session is kept for that node's path; this
  // page signs in as it otherwise would.
  const peer = peers.find((p) => p.name === codeNode);
  if (code !== null && peer) {
    const next = await api("POST", "/api/sign-in", { code }, null, peer.base).catch(() => null);
    if (next) localStorage.setItem(`tmux-engine.session:${peer.base.pathname}`, next.session);
    else showError(`node ${peer.name}: this sign-in link was already used or has expired`);
    code = null;
  }
  const current = session ? await api("GET", "/api/session").catch(() => null) : null;
  if (!current && !session) {
    // `--no-auth`: the API answers without a credential.
    const open = await api("GET", "/api/session", undefined, null).catch(() => null);
    if (open && code === null) return open;
  }
  if (code !== null) {
    const next = await exchange(code);
    if (next && current && next.owner !== current.owner) {
      offerSwitch(current, next);
      return current;
    }
    if (next) {
      session = next.session;
      localStorage.setItem(SESSION, session);
      return next;
    }
    if (!current) {
      signInPanel("This sign-in link was already used or has expired. Each link works once.");
      return null;
    }
  }
  if (!current) {
    signInPanel(session ? "Your session ended (serve restarted, or the link was revoked)." : "This page needs a sign-in link.");
    if (session) localStorage.removeItem(SESSION);
    session = null;
    return null;
  }
  return current;
}
