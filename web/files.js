// Files in and out of the open terminal (src/bridge/files.rs): a file
// dropped on the terminal, or picked with the bar's ⇪, is written into the
// terminal's working directory (PUT .../files?name=), with its progress in
// the bar and, if a file of that name is there, a prompt to replace it;
// where it went is said in a line of the page (never typed into the
// program). The bar's ⇩ asks for a path (relative to that directory, or
// absolute) and downloads it, as does a file:// link a program prints
// (OSC 8; the shell integration's `te-download FILE` prints one).
// Loaded after app.js, whose `$`, `view`, `term`, `url`, `session`, `baseOf`, `credentialAt` and
// `setStatus` it uses.
"use strict";

const files = (() => {
  // One line in the page saying what happened, dismissed by a tap or the next one.
  function note(text, ...buttons) {
    const line = $("transfer");
    line.replaceChildren(document.createTextNode(text), ...buttons);
    line.hidden = false;
    clearTimeout(note.timer);
    if (buttons.length === 0) note.timer = setTimeout(() => { line.hidden = true; }, 15000);
  }
  function button(text, title, onclick) {
    const b = document.createElement("button");
    b.type = "button";
    b.className = "plain";
    b.textContent = text;
    b.title = title;
    b.onclick = (event) => {
      event.stopPropagation();
      onclick();
    };
    return b;
  }
  const filesUrl = (query) => url(`api/terminals/${encodeURIComponent(view.id)}/files?${query}`, baseOf(view.id));
  const size = (n) => (n < 1024 ? `${n} bytes` : n < 1 << 20 ? `${(n / 1024).toFixed(1)} KiB` : `${(n / (1 << 20)).toFixed(1)} MiB`);

  // XMLHttpRequest, not fetch: only it reports an upload's progress.
  function upload(file, overwrite = false) {
    if (!view.id) return Promise.resolve();
    return new Promise((resolve) => {
      const xhr = new XMLHttpRequest();
      const query = `name=${encodeURIComponent(file.name)}${overwrite ? "&overwrite=true" : ""}`;
      xhr.open("PUT", filesUrl(query));
      xhr.setRequestHeader("content-type", "application/octet-stream");
      const credential = credentialAt(baseOf(view.id));
      if (credential) xhr.setRequestHeader("authorization", `Bearer ${credential}`);
      xhr.upload.onprogress = (event) => {
        if (event.lengthComputable) setStatus(`uploading ${file.name}: ${Math.floor((100 * event.loaded) / event.total)}%`);
      };
      xhr.onerror = () => { note(`Uploading ${file.name} failed: the connection broke`); resolve(); };
      xhr.onload = () => {
        let answer = {};
        try { answer = JSON.parse(xhr.responseText); } catch (error) { /* not JSON */ }
        setStatus("connected");
        if (xhr.status === 201) {
          view.lastUpload = answer;
          note(`${answer.replaced ? "Replaced" : "Uploaded"} ${answer.path} (${size(answer.size)})`);
        } else if (answer.error?.code === "DUPLICATE_NAME") {
          note(`${file.name} is already there. `,
            button("Replace", `replace ${file.name}`, () => upload(file, true)),
            button("Keep it", "keep the file that is there", () => { $("transfer").hidden = true; }));
        } else {
          note(`Upload of ${file.name} refused: ${answer.error ? `${answer.error.code}: ${answer.error.message}` : xhr.status}`);
        }
        resolve();
      };
      xhr.send(file);
    });
  }

  async function download(path) {
    if (!view.id || !path) return;
    const credential = credentialAt(baseOf(view.id));
    const headers = credential ? { authorization: `Bearer ${credential}` } : {};
    const response = await fetch(filesUrl(`path=${encodeURIComponent(path)}`), { headers });
    if (!response.ok) {
      const answer = await response.json().catch(() => ({}));
      note(`Download of ${path} refused: ${answer.error ? `${answer.error.code}: ${answer.error.message}` : response.status}`);
      return;
    }
    const total = Number(response.headers.get("content-length")) || 0;
    const reader = response.body.getReader();
    const chunks = [];
    let got = 0;
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      chunks.push(value);
      got += value.length;
      if (total) setStatus(`downloading ${path}: ${Math.floor((100 * got) / total)}%`);
    }
    setStatus("connected");
    const name = /filename\*=UTF-8''([^;]+)/.exec(response.headers.get("content-disposition") || "")?.[1];
    const file = name ? decodeURIComponent(name) : path.split("/").pop();
    const blob = new Blob(chunks, { type: "application/octet-stream" });
    view.lastDownload = { path, name: file, blob };
    const link = document.createElement("a");
    link.href = URL.createObjectURL(blob);
    link.download = file;
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(link.href), 60000);
    note(`Downloaded ${path} (${size(got)})`);
  }

  // The bar's ⇪ and ⇩.
  $("upload").onclick = () => $("upload-file").click();
  $("upload-file").onchange = async () => {
    for (const file of $("upload-file").files) await upload(file);
    $("upload-file").value = "";
  };
  $("download").onclick = () => {
    const form = document.createElement("form");
    form.id = "download-form";
    const field = document.createElement("input");
    field.id = "download-path";
    field.placeholder = "a path in the working directory, or absolute";
    field.setAttribute("aria-label", "file to download");
    const go = document.createElement("button");
    go.type = "submit";
    go.textContent = "Download";
    form.append(field, go, button("Cancel", "cancel", () => { $("transfer").hidden = true; }));
    form.onsubmit = (event) => {
      event.preventDefault();
      download(field.value.trim()).catch((error) => note(String(error.message || error)));
    };
    note("Download… ", form);
    field.focus();
  };

  // Dropped on the terminal.
  const stage = $("stage");
  stage.addEventListener("dragover", (event) => {
    if (!view.id || view.readOnly) return;
    event.preventDefault();
    stage.classList.add("dropping");
  });
  stage.addEventListener("dragleave", () => stage.classList.remove("dropping"));
  stage.addEventListener("drop", async (event) => {
    stage.classList.remove("dropping");
    if (!view.id || view.readOnly) return;
    event.preventDefault();
    for (const file of event.dataTransfer.files) await upload(file);
  });

  // OSC 8 links: file:// ones (te-download's, `ls --hyperlink`'s) are
  // downloads of that path; web ones open in a tab that cannot reach back.
  term.options.linkHandler = {
    allowNonHttpProtocols: true,
    activate(event, uri) {
      view.lastLink = uri;
      let parsed;
      try { parsed = new URL(uri); } catch (error) { return; }
      if (parsed.protocol === "file:") {
        download(decodeURIComponent(parsed.pathname)).catch((error) => note(String(error.message || error)));
      } else if (parsed.protocol === "http:" || parsed.protocol === "https:") {
        const opened = window.open();
        if (opened) {
          opened.opener = null;
          opened.location.href = uri;
        }
      }
    },
  };
  $("transfer").addEventListener("click", (event) => {
    if (event.target === $("transfer") && !$("download-form")) $("transfer").hidden = true;
  });

  return { upload, download };
})();
window.tmuxEngine.files = files;
