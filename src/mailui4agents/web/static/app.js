// MailUI4Agents web UI: live updates (EventSource), decisions by fetch, address
// completion, uploads. Everything here is an addition: pages work without it.
"use strict";
(function () {
  const csrf = (document.querySelector('meta[name="csrf-token"]') || {}).content || "";
  const COLLAPSED = "am-collapsed";
  const status = document.getElementById("live-status");
  let programmatic = 0;

  function say(text) { if (status) status.textContent = text; }

  // ---- collapse rule --------------------------------------------------------
  // A group the person collapsed stays collapsed, unless a request arrives that
  // was not pending when they collapsed it: then it opens itself. Collapsing it
  // again after that keeps it collapsed (the new request is then "seen").
  function loadCollapsed() {
    try { return JSON.parse(localStorage.getItem(COLLAPSED) || "{}"); } catch (e) { return {}; }
  }
  function saveCollapsed(state) {
    try { localStorage.setItem(COLLAPSED, JSON.stringify(state)); } catch (e) { /* private mode */ }
  }
  function pendingIds(group) {
    return (group.dataset.pendingIds || "").split(/\s+/).filter(Boolean);
  }
  function setOpen(group, open) {
    if (group.open === open) return;
    programmatic++;
    group.open = open;
  }
  function applyCollapse() {
    const state = loadCollapsed();
    let changed = false;
    document.querySelectorAll("details.group").forEach((g) => {
      const seen = state[g.dataset.session];
      if (!seen) return;
      const fresh = pendingIds(g).filter((id) => !seen.includes(id));
      if (fresh.length) {
        delete state[g.dataset.session];
        changed = true;
        setOpen(g, true);
      } else {
        setOpen(g, false);
      }
    });
    if (changed) saveCollapsed(state);
  }
  function watchGroup(g) {
    if (g.dataset.watched) return;
    g.dataset.watched = "1";
    g.addEventListener("toggle", () => {
      if (programmatic > 0) { programmatic--; return; }
      const state = loadCollapsed();
      if (g.open) delete state[g.dataset.session];
      else state[g.dataset.session] = pendingIds(g);
      saveCollapsed(state);
    });
  }

  // ---- merging a freshly rendered page into this one ------------------------
  // Lists keep the elements they already show (a half-typed note survives),
  // add new ones in place and drop the gone ones; "replace" parts are swapped.
  function syncAttributes(from, to) {
    for (const a of Array.from(from.attributes)) {
      if (a.name === "open" || a.name === "data-watched") continue;
      if (to.getAttribute(a.name) !== a.value) to.setAttribute(a.name, a.value);
    }
  }
  function mergeList(oldList, newList) {
    const wanted = Array.from(newList.children).filter((c) => c.id);
    const keep = new Set(wanted.map((c) => c.id));
    Array.from(oldList.children).forEach((c) => { if (c.id && !keep.has(c.id)) c.remove(); });
    let before = null;
    for (let i = wanted.length - 1; i >= 0; i--) {
      const fresh = wanted[i];
      let el = document.getElementById(fresh.id);
      if (!el || el.parentElement !== oldList) {
        el = document.importNode(fresh, true);
        oldList.insertBefore(el, before);
      } else {
        syncAttributes(fresh, el);
      }
      before = el;
    }
  }
  function merge(doc) {
    doc.querySelectorAll("[data-live]").forEach((fresh) => {
      const old = document.getElementById(fresh.id);
      if (!old) return;
      if (fresh.dataset.live === "list") mergeList(old, fresh);
      else if (old.innerHTML !== fresh.innerHTML) old.innerHTML = fresh.innerHTML;
    });
    document.title = doc.title;
    document.body.dataset.pending = doc.body.dataset.pending || "0";
    setup(document);
  }

  let refreshing = null;
  let again = false;
  async function refresh() {
    if (refreshing) { again = true; return refreshing; }
    refreshing = (async () => {
      do {
        again = false;
        try {
          const r = await fetch(location.href, { headers: { "X-Live": "1" }, credentials: "same-origin" });
          if (r.redirected && new URL(r.url).pathname === "/login") { location.href = r.url; return; }
          if (!r.ok) return;
          merge(new DOMParser().parseFromString(await r.text(), "text/html"));
        } catch (e) { /* offline: the next event or reconnect refreshes */ }
      } while (again);
    })();
    try { await refreshing; } finally { refreshing = null; }
  }

  // ---- live events ----------------------------------------------------------
  // A page's own announcement of a new request, when it is open (the gateway may
  // not push while a page of the person is visible: docs/web.md). Through the
  // service worker when there is one, tagged with the request's id, so the push
  // for the same request replaces it instead of adding a second one.
  function notify(data) {
    if (!("Notification" in window) || Notification.permission !== "granted") return;
    const title = "Approval requested";
    const options = { body: `${data.agent || "An agent"}: ${data.tool_name || data.question || ""}`, tag: data.id, data: { url: "/approvals" } };
    const fallback = () => { try { new Notification(title, options); } catch (e) { /* some browsers notify only from a worker */ } };
    if (navigator.serviceWorker && navigator.serviceWorker.controller) {
      navigator.serviceWorker.ready.then((r) => r.showNotification(title, options)).catch(fallback);
    } else {
      fallback();
    }
  }
  // The stream. The browser reconnects a dropped EventSource by itself, but after
  // a phone slept (or the OS closed the connection) it may wait long, or give up
  // (CLOSED): when the page is shown again it is reopened at once, from the last
  // event this page saw.
  let stream = null;
  let lastEventId = "";
  function streamUrl() {
    const url = document.body.dataset.events;
    if (!url || !lastEventId) return url;
    const u = new URL(url, location.href);
    u.searchParams.set("last_event_id", lastEventId);
    return u.pathname + u.search;
  }
  function connect() {
    const url = streamUrl();
    if (!url || !("EventSource" in window)) return;
    if (stream) stream.close();
    // The page's render position is in the URL; on a reconnect the browser sends
    // Last-Event-ID, which the server prefers: nothing is lost in between.
    const es = new EventSource(url);
    stream = es;
    window.__agentmailStream = es;
    const onEvent = (ev) => {
      if (ev.lastEventId) lastEventId = ev.lastEventId;
      if (ev.type === "permission_request") {
        try { notify(JSON.parse(ev.data)); } catch (e) { /* not JSON */ }
        say("New request");
      }
      refresh();
    };
    ["new_mail", "permission_request", "permission_decision", "session_update", "work_action", "reset"].forEach((t) =>
      es.addEventListener(t, onEvent));
    es.addEventListener("open", () => { document.body.dataset.live = "open"; });
    es.addEventListener("error", () => {
      document.body.dataset.live = es.readyState === EventSource.CLOSED ? "closed" : "reconnecting";
    });
  }
  function revive() {
    if (document.visibilityState === "hidden" || !document.body.dataset.events) return;
    if (stream && stream.readyState === EventSource.OPEN) return;
    // CLOSED, or CONNECTING on the browser's own back-off: a new one now; and the
    // page itself, since events may have passed while nothing listened.
    connect();
    refresh();
  }
  document.addEventListener("visibilitychange", revive);
  window.addEventListener("pageshow", (e) => { if (e.persisted) revive(); });
  window.addEventListener("online", revive);

  // ---- presence: "not while my page is visible" (docs/web.md) ------------------
  // While a page is visible the gateway may hold pushes back: this page says so
  // when it is shown or hidden, and every 30 s while shown. An endpoint that is
  // not there (404) ends it quietly.
  const PRESENCE_EVERY_MS = 30000;
  let presenceTimer = null;
  let presenceGone = false;
  function presence() {
    if (presenceGone || !document.body.dataset.events || !csrf) return;
    const visible = document.visibilityState === "visible";
    fetch("/api/v1/me/presence", {
      method: "POST", credentials: "same-origin", keepalive: true,
      headers: { "Content-Type": "application/json", "X-CSRF-Token": csrf },
      body: JSON.stringify({ visible }),
    }).then((r) => {
      if (r.status === 404 || r.status === 405) { presenceGone = true; clearInterval(presenceTimer); }
    }, () => { /* offline: the next beat says it */ });
    clearInterval(presenceTimer);
    presenceTimer = visible && !presenceGone ? setInterval(presence, PRESENCE_EVERY_MS) : null;
  }
  document.addEventListener("visibilitychange", presence);

  // ---- the service worker (static/sw.js, served at /sw.js) -----------------------
  function registerWorker() {
    if (!("serviceWorker" in navigator)) { document.documentElement.dataset.sw = "unsupported"; return; }
    navigator.serviceWorker.register("/sw.js", { scope: "/" }).then(
      () => { document.documentElement.dataset.sw = "registered"; },
      (e) => { document.documentElement.dataset.sw = "failed"; console.warn("service worker:", e); });
  }

  // ---- the offline page (templates/offline.html, shown by the worker) ----------
  // Asks /healthz with a growing pause (1 s, 2 s, 4 s … at most 15 s), at once
  // when the browser says it is online again or the page is shown; reloads the
  // page that could not be opened as soon as the gateway answers.
  function offlineRetry() {
    if (!document.body.dataset.offline) return;
    const message = document.getElementById("offline-message");
    let pause = 1000;
    let timer = null;
    let tries = 0;
    async function attempt() {
      clearTimeout(timer);
      tries++;
      try {
        const r = await fetch("/healthz", { cache: "no-store", credentials: "omit" });
        if (r.ok) {
          if (message) message.textContent = "The gateway answers — reloading…";
          if (location.pathname === "/offline") location.replace("/");
          else location.reload();
          return;
        }
      } catch (e) { /* still unreachable */ }
      if (message) message.textContent = `The gateway cannot be reached — retrying… (attempt ${tries})`;
      timer = setTimeout(attempt, pause);
      pause = Math.min(pause * 2, 15000);
    }
    const now = () => { pause = 1000; attempt(); };
    window.addEventListener("online", now);
    document.addEventListener("visibilitychange", () => { if (document.visibilityState === "visible") now(); });
    const button = document.getElementById("offline-retry");
    if (button) button.addEventListener("click", now);
    timer = setTimeout(attempt, pause);
  }

  // ---- decisions by fetch ----------------------------------------------------
  async function post(form, body) {
    const r = await fetch(form.action, {
      method: "POST", body, credentials: "same-origin",
      headers: { "Accept": "application/json", "X-CSRF-Token": csrf },
    });
    let payload = null;
    try { payload = await r.json(); } catch (e) { /* not JSON */ }
    return { ok: r.ok, status: r.status, payload };
  }
  function onDecide(ev) {
    const form = ev.target;
    if (!(form instanceof HTMLFormElement) || !form.classList.contains("decide")) return;
    ev.preventDefault();
    const err = form.querySelector(".form-error");
    const body = new FormData(form, ev.submitter); // before the buttons are disabled
    const buttons = form.querySelectorAll("button");
    buttons.forEach((b) => { b.disabled = true; });
    post(form, body).then(({ ok, payload }) => {
      if (ok) {
        const article = form.closest("article");
        if (article) article.remove();
        say("Decision sent");
        refresh();
        return;
      }
      buttons.forEach((b) => { b.disabled = false; });
      if (err) {
        err.textContent = (payload && payload.error && payload.error.message) || "Could not send the decision";
        err.hidden = false;
      }
    }, () => {
      buttons.forEach((b) => { b.disabled = false; });
      if (err) { err.textContent = "Network error: try again"; err.hidden = false; }
    });
  }

  // ---- "Always allow" names what the pattern field makes it allow --------------
  // The server rendered the words (web/render.py always_allow); empty: the input
  // itself, "*": every input, else the pattern ("{}" marks its place).
  const SHELL_CONTROL = /[;&|`<>\n\r]|\$\(|\$\{/;
  function onPattern(ev) {
    const input = ev.target;
    if (!(input instanceof HTMLInputElement) || input.name !== "grant_pattern") return;
    const button = input.form && input.form.querySelector("button[value=always]");
    if (!button) return;
    const value = input.value.trim();
    let text = button.dataset.exact;
    if (value === "*") text = button.dataset.every;
    else if (value) {
      const words = SHELL_CONTROL.test(value) ? button.dataset.literal : button.dataset.prefix;
      text = words.replace("{}", value);
    }
    if (text && button.textContent !== text) button.textContent = text;
  }

  // ---- time left -------------------------------------------------------------
  function tick() {
    document.querySelectorAll("time[data-expires]").forEach((t) => {
      if (!t.dataset.expires) return;
      const left = Math.round((Date.parse(t.dataset.expires) - Date.now()) / 1000);
      let text = "expired";
      if (left > 0 && left < 60) text = `${left} s left`;
      else if (left >= 60 && left < 3600) text = `${Math.floor(left / 60)} min left`;
      else if (left >= 3600) text = `${Math.floor(left / 3600)} h ${Math.floor((left % 3600) / 60)} min left`;
      if (t.textContent !== text) t.textContent = text;
    });
  }

  // ---- address completion (names -> workspaces -> sessions) ------------------
  function completion(input) {
    const list = document.getElementById(input.getAttribute("aria-controls"));
    if (!list || input.dataset.ready) return;
    input.dataset.ready = "1";
    let items = [];
    let active = -1;
    let timer = null;
    const part = () => {
      const v = input.value;
      const i = v.lastIndexOf(",");
      return { head: i < 0 ? "" : v.slice(0, i + 1) + " ", tail: (i < 0 ? v : v.slice(i + 1)).trim() };
    };
    const close = () => { list.hidden = true; input.setAttribute("aria-expanded", "false"); input.removeAttribute("aria-activedescendant"); active = -1; };
    const choose = (i) => {
      const it = items[i];
      if (!it) return;
      input.value = part().head + it.value;
      close();
      input.focus();
      if (it.more) lookup();
    };
    const render = () => {
      list.textContent = "";
      items.forEach((it, i) => {
        const li = document.createElement("li");
        li.id = `${list.id}-${i}`;
        li.setAttribute("role", "option");
        li.setAttribute("aria-selected", i === active ? "true" : "false");
        li.textContent = it.value;
        if (it.hint) { const s = document.createElement("small"); s.textContent = it.hint; li.appendChild(s); }
        li.addEventListener("mousedown", (e) => { e.preventDefault(); choose(i); });
        list.appendChild(li);
      });
      const open = items.length > 0;
      list.hidden = !open;
      input.setAttribute("aria-expanded", open ? "true" : "false");
      if (active >= 0) input.setAttribute("aria-activedescendant", `${list.id}-${active}`);
      else input.removeAttribute("aria-activedescendant");
    };
    async function lookup() {
      const q = part().tail;
      if (!q) { items = []; close(); return; }
      try {
        const r = await fetch(`/suggest?q=${encodeURIComponent(q)}`, { credentials: "same-origin" });
        if (!r.ok) return;
        const d = await r.json();
        items = [];
        (d.names || []).forEach((n) => items.push(n.kind === "agent"
          ? { value: `${n.name}@`, hint: "agent: choose a workspace next", more: true }
          : { value: n.name, hint: "person" }));
        (d.paths || []).forEach((p) => p.address && items.push({ value: `${p.address}.`, hint: "workspace: choose a session next, or 'new'", more: true }));
        (d.sessions || []).forEach((s) => s.address && items.push({ value: s.address, hint: s.title || s.alias || "session" }));
        active = -1;
        render();
      } catch (e) { /* offline */ }
    }
    input.addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(lookup, 120); });
    input.addEventListener("keydown", (e) => {
      if (list.hidden) return;
      if (e.key === "ArrowDown") { active = (active + 1) % items.length; render(); e.preventDefault(); }
      else if (e.key === "ArrowUp") { active = (active - 1 + items.length) % items.length; render(); e.preventDefault(); }
      else if ((e.key === "Enter" || e.key === "Tab") && active >= 0) { choose(active); e.preventDefault(); }
      else if (e.key === "Escape") { close(); e.preventDefault(); }
    });
    input.addEventListener("blur", () => setTimeout(close, 150));
  }

  // ---- uploads with progress ---------------------------------------------------
  function uploads() {
    const box = document.getElementById("attach");
    const input = document.getElementById("files");
    if (!box || !input || box.dataset.ready) return;
    box.dataset.ready = "1";
    box.hidden = false;
    const ids = document.getElementById("attachment_ids");
    const bar = document.getElementById("upload-progress");
    const listed = document.getElementById("attached");
    input.addEventListener("change", () => {
      Array.from(input.files || []).forEach((file) => {
        const fd = new FormData();
        fd.append("file", file, file.name);
        const xhr = new XMLHttpRequest();
        xhr.open("POST", "/attachments");
        xhr.setRequestHeader("X-CSRF-Token", csrf);
        xhr.setRequestHeader("Accept", "application/json");
        bar.hidden = false;
        xhr.upload.addEventListener("progress", (e) => { if (e.lengthComputable) bar.value = Math.round((100 * e.loaded) / e.total); });
        xhr.addEventListener("load", () => {
          const li = document.createElement("li");
          if (xhr.status === 201) {
            const d = JSON.parse(xhr.responseText);
            ids.value = ids.value ? `${ids.value},${d.attachment_id}` : d.attachment_id;
            li.textContent = `${d.name} (${d.size} bytes)`;
          } else {
            li.textContent = `${file.name}: upload failed`;
          }
          listed.appendChild(li);
          bar.value = 100;
        });
        xhr.send(fd);
      });
      input.value = "";
    });
  }

  // ---- misc ------------------------------------------------------------------
  function setup(root) {
    root.querySelectorAll("details.group").forEach(watchGroup);
    root.querySelectorAll("input[data-complete]").forEach(completion);
    applyCollapse();
    tick();
  }
  document.addEventListener("submit", onDecide);
  document.addEventListener("input", onPattern);
  document.addEventListener("click", (e) => {
    const b = e.target instanceof Element ? e.target.closest("[data-copy]") : null;
    if (!b) return;
    const field = document.getElementById(b.dataset.copy);
    if (!field) return;
    field.select();
    (navigator.clipboard ? navigator.clipboard.writeText(field.value) : Promise.reject()).then(
      () => say("Copied"), () => { document.execCommand && document.execCommand("copy"); say("Copied"); });
  });
  document.addEventListener("DOMContentLoaded", () => {
    setup(document);
    uploads();
    const n = document.getElementById("notify");
    // Notifications are turned on in one place, /devices: the browser's permission
    // and this device's push subscription together (push.js).
    if (n && "Notification" in window && Notification.permission === "default") n.hidden = false;
    setInterval(tick, 1000);
    registerWorker();
    offlineRetry();
    connect();
    if (document.visibilityState === "visible") presence();
  });
})();
