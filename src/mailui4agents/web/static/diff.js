// Comments on a `work` mail's diff (templates/_diff.html, docs/review.md).
// A line's number is a button: Enter or a click opens a comment form under the
// line; Shift+Enter or shift-click on a second line of the same file and side
// makes the comment cover the range; Escape closes the form and gives the focus
// back to the line. The comment is posted to /mails/{id}/comments and shown at
// once, "pending"; "Send review (N)" sends them all (/sessions/{id}/review) and
// marks them "sent". Every text from the page goes in with textContent.
"use strict";
(function () {
  const csrf = (document.querySelector('meta[name="csrf-token"]') || {}).content || "";
  const MAX_RANGE = 200; // the gateway's: end_line at most line + 200
  let open = null; // { form, cell, side, line, end, file, mail }
  let seq = 0;

  function say(text) {
    const s = document.getElementById("live-status");
    if (s) s.textContent = text;
  }
  function cellsOf(file, side) {
    return Array.from(file.querySelectorAll(`.c[data-side="${side}"]`));
  }
  function mark(file, side, from, to) {
    document.querySelectorAll(".diff .c.picked").forEach((c) => c.classList.remove("picked"));
    if (!file) return;
    cellsOf(file, side).forEach((c) => {
      const n = Number(c.dataset.line);
      if (n >= from && n <= to) c.classList.add("picked");
    });
  }
  function close(giveFocus) {
    if (!open) return;
    const { form, cell } = open;
    form.remove();
    mark(null);
    open = null;
    if (giveFocus) {
      const b = cell.querySelector("button.ln");
      if (b) b.focus();
    }
  }
  function where(o) {
    return o.end > o.line ? `lines ${o.line}–${o.end}` : `line ${o.line}`;
  }
  function build(side) {
    seq++;
    const form = document.createElement("form");
    form.className = `cform ${side}`;
    const head = document.createElement("p");
    head.className = "meta chead";
    const label = document.createElement("label");
    label.htmlFor = `cf-${seq}`;
    const text = document.createElement("textarea");
    text.id = `cf-${seq}`;
    text.name = "body";
    text.rows = 3;
    text.maxLength = 4000;
    text.required = true;
    const err = document.createElement("p");
    err.className = "form-error";
    err.setAttribute("role", "alert");
    err.hidden = true;
    const buttons = document.createElement("div");
    buttons.className = "buttons";
    const add = document.createElement("button");
    add.type = "submit";
    add.className = "primary";
    add.textContent = "Add comment";
    const cancel = document.createElement("button");
    cancel.type = "button";
    cancel.textContent = "Cancel";
    cancel.addEventListener("click", () => close(true));
    buttons.append(add, cancel);
    form.append(head, label, text, err, buttons);
    form.addEventListener("keydown", (e) => {
      if (e.key === "Escape") { e.preventDefault(); close(true); }
    });
    form.addEventListener("submit", (e) => { e.preventDefault(); submit(); });
    return form;
  }
  function describe() {
    const o = open;
    const path = o.file.dataset.path || "";
    o.form.querySelector(".chead").textContent =
      `${path}, ${where(o)}${o.side === "old" ? " (old)" : ""} — Shift+Enter on another line makes a range`;
    o.form.querySelector("label").textContent = `Comment on ${where(o)}`;
  }
  function place(cell) {
    // Under the row of the last line of the range.
    cell.closest(".row").appendChild(open.form);
  }
  function pick(cell, extend) {
    const file = cell.closest("details.file");
    const diff = cell.closest(".diff");
    if (!file || !diff) return;
    const side = cell.dataset.side;
    const line = Number(cell.dataset.line);
    if (extend && open && open.file === file && open.side === side) {
      const from = Math.min(open.line, line);
      const to = Math.max(open.end, line);
      if (to - from > MAX_RANGE) { say(`A comment covers at most ${MAX_RANGE + 1} lines`); return; }
      open.line = from;
      open.end = to;
      const last = cellsOf(file, side).find((c) => Number(c.dataset.line) === to) || cell;
      open.cell = last;
      place(last);
    } else {
      const kept = open && open.form.querySelector("textarea").value;
      close(false);
      open = { form: build(side), cell, side, line, end: line, file, mail: diff.dataset.mail };
      place(cell);
      if (kept) open.form.querySelector("textarea").value = kept;
    }
    mark(file, side, open.line, open.end);
    describe();
    open.form.querySelector("textarea").focus();
  }
  function counts(n) {
    document.querySelectorAll("[data-review-count]").forEach((el) => {
      el.dataset.reviewCount = String(n);
      el.textContent = `Send review (${n})`;
      el.disabled = n === 0;
    });
  }
  function pendingMine() {
    return document.querySelectorAll('.diff .cm.pending[data-mine="1"]').length;
  }
  function commentElement(c, o) {
    const div = document.createElement("div");
    div.className = `cm ${c.side || o.side} pending`;
    div.id = `cm-${c.id}`;
    div.dataset.comment = c.id;
    div.dataset.mine = "1";
    const meta = document.createElement("p");
    meta.className = "meta";
    const from = document.createElement("span");
    from.className = "from";
    from.textContent = c.author || "you";
    const chip = document.createElement("span");
    chip.className = "chip cstate";
    chip.textContent = "pending";
    const end = c.end_line && c.end_line !== c.line ? `–${c.end_line}` : "";
    meta.append(from, ` · line ${c.line}${end}${(c.side || o.side) === "old" ? " (old)" : ""} · `, chip);
    const body = document.createElement("p");
    body.className = "cbody";
    body.textContent = c.body;
    // Taken back like a rendered one: a plain form, the page comes back after it.
    const del = document.createElement("form");
    del.method = "post";
    del.action = `/comments/${encodeURIComponent(c.id)}/delete`;
    del.className = "cdelete";
    for (const [name, value] of [["csrf", csrf], ["next", location.pathname]]) {
      const input = document.createElement("input");
      input.type = "hidden";
      input.name = name;
      input.value = value;
      del.appendChild(input);
    }
    const button = document.createElement("button");
    button.type = "submit";
    button.className = "danger";
    button.textContent = "Delete";
    button.setAttribute("aria-label", `Delete the comment on line ${c.line}${end} of ${c.path || ""}`);
    del.appendChild(button);
    div.append(meta, body, del);
    return div;
  }
  async function submit() {
    const o = open;
    if (!o) return;
    const text = o.form.querySelector("textarea");
    const err = o.form.querySelector(".form-error");
    const body = text.value.trim();
    if (!body) { err.textContent = "Write a comment first"; err.hidden = false; text.focus(); return; }
    const fd = new FormData();
    fd.append("csrf", csrf);
    fd.append("path", o.file.dataset.path || "");
    fd.append("side", o.side);
    fd.append("line", String(o.line));
    if (o.end > o.line) fd.append("end_line", String(o.end));
    fd.append("body", body);
    const buttons = o.form.querySelectorAll("button");
    buttons.forEach((b) => { b.disabled = true; });
    let r = null;
    let payload = null;
    try {
      r = await fetch(`/mails/${encodeURIComponent(o.mail)}/comments`, {
        method: "POST", body: fd, credentials: "same-origin",
        headers: { "Accept": "application/json", "X-CSRF-Token": csrf },
      });
      try { payload = await r.json(); } catch (e) { /* not JSON */ }
    } catch (e) { /* offline */ }
    buttons.forEach((b) => { b.disabled = false; });
    if (!r || !r.ok) {
      err.textContent = (payload && payload.error && payload.error.message) || "Could not add the comment: try again";
      err.hidden = false;
      return;
    }
    const el = commentElement(payload, o);
    o.form.replaceWith(el);
    open = null;
    mark(null);
    counts(pendingMine());
    say("Comment added (pending)");
    const b = o.cell.querySelector("button.ln");
    if (b) b.focus();
  }
  async function sendReview(form) {
    const err = form.querySelector(".form-error");
    const button = form.querySelector("button[type=submit]");
    button.disabled = true;
    let r = null;
    let payload = null;
    try {
      r = await fetch(form.action, {
        method: "POST", body: new FormData(form), credentials: "same-origin",
        headers: { "Accept": "application/json", "X-CSRF-Token": csrf },
      });
      try { payload = await r.json(); } catch (e) { /* not JSON */ }
    } catch (e) { /* offline */ }
    if (!r || !r.ok) {
      button.disabled = false;
      if (err) {
        err.textContent = (payload && payload.error && payload.error.message) || "Could not send the review: try again";
        err.hidden = false;
      }
      return;
    }
    if (err) err.hidden = true;
    document.querySelectorAll('.diff .cm.pending[data-mine="1"]').forEach((c) => {
      c.classList.remove("pending");
      c.classList.add("sent");
      const chip = c.querySelector(".cstate");
      if (chip) chip.textContent = "sent";
    });
    counts(0);
    say(`Review sent (${(payload && payload.comments) || 0} comments)`);
  }

  // ---- one Tab stop per file; the arrow keys move between its lines ----------
  // Tab goes from file to file (and to the forms); Up/Down go to the line above
  // or below as it is shown (on a phone a change's deletions come before its
  // additions, whatever the order in the page), Home/End to the first and last.
  function rove(file) {
    if (file.dataset.roved) return;
    file.dataset.roved = "1";
    file.querySelectorAll("button.ln").forEach((b, i) => { b.tabIndex = i === 0 ? 0 : -1; });
  }
  function roveAll(root) {
    root.querySelectorAll(".diff details.file").forEach(rove);
  }
  function shown(file) {
    return Array.from(file.querySelectorAll("button.ln"))
      .map((b) => ({ b, r: b.getBoundingClientRect() }))
      .filter((x) => x.r.width > 0 && x.r.height > 0)
      .sort((x, y) => (x.r.top - y.r.top) || (x.r.left - y.r.left))
      .map((x) => x.b);
  }
  function stop(b) {
    const file = b.closest("details.file");
    if (!file) return;
    rove(file);
    file.querySelectorAll('button.ln[tabindex="0"]').forEach((o) => { if (o !== b) o.tabIndex = -1; });
    b.tabIndex = 0;
  }
  document.addEventListener("focusin", (e) => {
    const b = e.target instanceof Element ? e.target.closest(".diff button.ln") : null;
    if (b) stop(b);
  });
  document.addEventListener("keydown", (e) => {
    const b = e.target instanceof Element ? e.target.closest(".diff button.ln") : null;
    if (!b || !["ArrowDown", "ArrowUp", "Home", "End"].includes(e.key)) return;
    const list = shown(b.closest("details.file"));
    const i = list.indexOf(b);
    let to = null;
    if (e.key === "ArrowDown") to = list[i + 1];
    else if (e.key === "ArrowUp") to = list[i - 1];
    else if (e.key === "Home") to = list[0];
    else to = list[list.length - 1];
    e.preventDefault();
    if (to) to.focus();
  });
  document.addEventListener("DOMContentLoaded", () => {
    roveAll(document);
    const mails = document.getElementById("t-mails");
    if (mails && "MutationObserver" in window) {
      new MutationObserver(() => roveAll(mails)).observe(mails, { childList: true });
    }
  });

  document.addEventListener("click", (e) => {
    const b = e.target instanceof Element ? e.target.closest(".diff button.ln") : null;
    if (!b) return;
    e.preventDefault();
    pick(b.closest(".c"), e.shiftKey);
  });
  document.addEventListener("keydown", (e) => {
    const b = e.target instanceof Element ? e.target.closest(".diff button.ln") : null;
    if (!b || e.key !== "Enter") return;
    e.preventDefault(); // no second (click) event from the same key
    pick(b.closest(".c"), e.shiftKey);
  });
  document.addEventListener("submit", (e) => {
    const form = e.target;
    if (!(form instanceof HTMLFormElement) || !form.classList.contains("review-form")) return;
    e.preventDefault();
    sendReview(form);
  });
})();
