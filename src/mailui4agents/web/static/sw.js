// MailUI4Agents service worker (docs/web.md, "Install on your phone" and
// "Notifications in the browser"). Served at /sw.js (scope "/") by web/pwa.py,
// which puts `const CONFIG = {...}` before this file: the cache name (the
// gateway's version and a digest of the static files), the app shell's URLs.
//
// What is cached: the app shell only (the offline page, app.css, app.js, the
// icons, the manifest). Never an API answer nor a page of the app: those carry
// one person's mail and requests, would go stale, and on a shared phone would
// show one person's pages to the next. Navigations go to the network; only when
// the gateway cannot be reached is the offline page shown, which retries by itself.
"use strict";
/* global CONFIG */

const SHELL_PREFIX = "agentmail-shell-";
const HANDLED = new Set(["decided", "withdrawn"]);
const ASKING = new Set(["permission_request", "reminder", "escalation"]);

self.addEventListener("install", (event) => {
  event.waitUntil((async () => {
    const cache = await caches.open(CONFIG.cache);
    // `cache: "reload"`: the files themselves, not what the HTTP cache holds.
    await cache.addAll(CONFIG.shell.map((u) => new Request(u, { cache: "reload", credentials: "omit" })));
    await self.skipWaiting();
  })());
});

self.addEventListener("activate", (event) => {
  event.waitUntil((async () => {
    // A new release: the shell of the old one goes.
    for (const name of await caches.keys()) {
      if (name.startsWith(SHELL_PREFIX) && name !== CONFIG.cache) await caches.delete(name);
    }
    await self.clients.claim();
  })());
});

// ---- fetch: network first for pages, the offline page when unreachable -------

async function offlinePage() {
  const cached = await caches.match(CONFIG.offline, { cacheName: CONFIG.cache });
  if (cached) return cached;
  return new Response("The gateway cannot be reached — retrying…", {
    status: 503, headers: { "Content-Type": "text/plain; charset=utf-8" },
  });
}

async function navigate(request) {
  try {
    const response = await fetch(request);
    // A proxy in front (Caddy, tailscale serve) answers 502/504 when the
    // gateway behind it is down: that is "unreachable" too.
    if (response.status === 502 || response.status === 504) return offlinePage();
    return response;
  } catch (e) {
    return offlinePage();
  }
}

self.addEventListener("fetch", (event) => {
  const request = event.request;
  if (request.method !== "GET") return;
  const url = new URL(request.url);
  if (url.origin !== self.location.origin) return;
  if (request.mode === "navigate") {
    event.respondWith(navigate(request));
    return;
  }
  // The shell's static files have content-hashed names: the cached copy is the file.
  if (url.pathname.startsWith("/static/") && CONFIG.shell.includes(url.pathname)) {
    event.respondWith(caches.match(url.pathname, { cacheName: CONFIG.cache }).then((r) => r || fetch(request)));
  }
  // Everything else (the API, /events, pages fetched by app.js): the network, untouched.
});

// ---- push: show what the gateway sent -----------------------------------------

function sameOrigin(value, fallback) {
  try {
    const u = new URL(value, self.location.origin);
    if (u.origin === self.location.origin) return u.pathname + u.search + u.hash;
  } catch (e) { /* not a URL */ }
  return fallback;
}

function postJSON(path, body) {
  // The token is the credential (docs/api.md): no cookie goes with these.
  return fetch(path, {
    method: "POST", credentials: "omit", cache: "no-store",
    headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
  });
}

function receipt(token, state) {
  if (!token) return Promise.resolve();
  // Fire and forget: a receipt lost costs only a line in the delivery record.
  return postJSON("/api/v1/push/receipts", { token, state }).catch(() => undefined);
}

function text(value, max) {
  const s = typeof value === "string" ? value : "";
  return s.length > max ? `${s.slice(0, max - 1)}…` : s;
}

// The options of a notification for the gateway's payload (docs/web.md).
function notificationFor(d) {
  const type = typeof d.type === "string" ? d.type : "";
  const handled = HANDLED.has(type);
  const tag = text(d.tag || d.request_id, 200);
  const url = sameOrigin(d.url, "/approvals");
  const limit = (self.Notification && Notification.maxActions) || 2;
  const actions = handled || !d.action_token || !Array.isArray(d.actions) ? [] : d.actions
    .filter((a) => a && typeof a.action === "string" && typeof a.title === "string")
    .slice(0, limit)
    .map((a) => ({ action: text(a.action, 200), title: text(a.title, 60) }));
  const title = text(d.title, 200) || (handled ? "Already handled" : "MailUI4Agents");
  const options = {
    body: text(d.body, 1000),
    icon: CONFIG.icon,
    badge: CONFIG.badge,
    data: {
      url, type,
      request_id: typeof d.request_id === "string" ? d.request_id : null,
      action_token: handled ? null : (typeof d.action_token === "string" ? d.action_token : null),
    },
    actions,
    requireInteraction: ASKING.has(type),
  };
  if (tag) {
    options.tag = tag;
    // A new request (or a reminder) alerts again; "already handled" replaces quietly.
    options.renotify = !handled;
  }
  return { title, options };
}

async function showPush(payload) {
  let d = null;
  try { d = payload ? payload.json() : null; } catch (e) { d = null; }
  if (!d || typeof d !== "object") {
    // userVisibleOnly: every push shows something, even one we cannot read.
    await self.registration.showNotification("MailUI4Agents", {
      body: "A notification arrived that could not be read. Open the approvals page.",
      icon: CONFIG.icon, data: { url: "/approvals" },
    });
    return;
  }
  const { title, options } = notificationFor(d);
  await self.registration.showNotification(title, options);
  if (!HANDLED.has(options.data.type)) await receipt(d.action_token, "shown");
}

// What this worker did with pushes since it started (read by the browser tests;
// an error is kept, never swallowed).
self.pushState = { received: 0, shown: 0, errors: [] };

async function onPush(payload) {
  self.pushState.received++;
  try {
    await showPush(payload);
    self.pushState.shown++;
  } catch (e) {
    self.pushState.errors.push(String((e && e.stack) || e));
    // Still show something: a push the person cannot see is a request missed.
    await self.registration.showNotification("MailUI4Agents", {
      body: "A request may be waiting. Open the approvals page.", data: { url: "/approvals" },
    });
  }
}

self.addEventListener("push", (event) => { event.waitUntil(onPush(event.data)); });

// ---- a click on a notification or one of its buttons --------------------------

// The request's page: a window of the app already showing it is focused, else
// one of the app's windows is sent there, else a new one opens. (Focus and new
// windows are allowed in a real click only; refused, the navigation still counts.)
async function openPage(url) {
  const target = new URL(sameOrigin(url, "/approvals"), self.location.origin).href;
  const windows = await self.clients.matchAll({ type: "window", includeUncontrolled: true });
  const focus = async (w) => { try { await w.focus(); } catch (e) { /* no user gesture */ } };
  const same = windows.find((w) => w.url === target);
  if (same) { await focus(same); return "focused"; }
  for (const w of windows) {
    try {
      const moved = await w.navigate(target);
      if (moved) { await focus(moved); return "navigated"; }
    } catch (e) { /* not a window this worker controls */ }
  }
  try {
    await self.clients.openWindow(target);
    return "opened";
  } catch (e) {
    return "not allowed";
  }
}

async function replace(notification, title, body) {
  const options = { body, icon: CONFIG.icon, data: { url: notification.data && notification.data.url } };
  if (notification.tag) options.tag = notification.tag;
  await self.registration.showNotification(title, options);
}

// 409 `already_decided` (services/permissions.already_decided): who was first,
// and the server's sentence saying from where, when and how it ended.
function alreadyHandled(body) {
  const e = (body && body.error) || {};
  const who = typeof e.decided_by === "string" && !e.decided_by.startsWith("grant:") ? e.decided_by : "";
  return {
    title: who ? `Already handled by ${text(who, 100)}` : "Already handled",
    body: text(e.message, 1000),
  };
}

// The whole of a click, exposed so that a test can run it in the worker
// (tests/web/test_browser_push.py); answers what it did.
self.handleNotificationAction = async function handleNotificationAction(notification, action) {
  const data = notification.data || {};
  if (!action || !data.action_token) {
    notification.close();
    await receipt(data.action_token, "opened");
    return { outcome: "opened", url: data.url || "/approvals", window: await openPage(data.url) };
  }
  notification.close();
  let response;
  try {
    response = await postJSON("/api/v1/push/actions", { token: data.action_token, action });
  } catch (e) {
    await replace(notification, "Not sent: the gateway cannot be reached", "Open the request to decide it.");
    return { outcome: "unreachable" };
  }
  let body = null;
  try { body = await response.json(); } catch (e) { body = null; }
  if (response.ok) return { outcome: "decided", status: response.status, decision: body };
  if (response.status === 409) {
    const handled = alreadyHandled(body);
    await replace(notification, handled.title, handled.body || notification.body || "");
    return { outcome: "already_decided", status: 409, body };
  }
  if (response.status === 401) {
    // The token was used, expired or revoked: the page decides with the login.
    return { outcome: "opened", status: 401, url: data.url || "/approvals", window: await openPage(data.url) };
  }
  const why = (body && body.error && body.error.message) || `HTTP ${response.status}`;
  await replace(notification, "The decision was not taken", `${why}. Open the request to decide it.`);
  return { outcome: "refused", status: response.status, body };
};

self.addEventListener("notificationclick", (event) => {
  event.waitUntil(self.handleNotificationAction(event.notification, event.action));
});

// ---- the browser replaced the subscription ------------------------------------

// The push service may expire or rotate a subscription; the browser then fires
// `pushsubscriptionchange`. The gateway is told the new one, proved by the old
// endpoint and its auth secret (POST /api/v1/push/subscriptions/renew: no cookie,
// which a worker cannot send with the page's CSRF token). Without the old one
// (some browsers give none) there is nothing to prove it with: the gateway's
// next push to the old endpoint is answered 404/410, the subscription is removed,
// and the person sees it on their next page (docs/remote.md, "When a push fails").
// Exposed so that a test can run it in the worker; answers what it did.
self.renewSubscription = async function renewSubscription(oldSub, newSub) {
  const old = oldSub && oldSub.toJSON();
  if (!old || !old.endpoint || !old.keys || !old.keys.auth) return { outcome: "no old subscription" };
  let sub = newSub;
  try {
    if (!sub) {
      const kr = await fetch("/api/v1/push/vapid-public-key", { credentials: "omit", cache: "no-store" });
      const key = (await kr.json()).key;
      sub = await self.registration.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: key });
    }
    const fresh = sub.toJSON();
    const response = await postJSON("/api/v1/push/subscriptions/renew", {
      old_endpoint: old.endpoint, old_auth: old.keys.auth, endpoint: fresh.endpoint, keys: fresh.keys,
    });
    return { outcome: response.ok ? "renewed" : "refused", status: response.status };
  } catch (e) {
    return { outcome: "failed", error: String(e) };
  }
};

self.addEventListener("pushsubscriptionchange", (event) => {
  event.waitUntil(self.renewSubscription(event.oldSubscription, event.newSubscription));
});
