// "Notifications on this device" on /devices (docs/web.md, "Notifications in the
// browser"): subscribes this browser to Web Push through the service worker
// (static/sw.js) and gives the subscription to the gateway. Every outcome is
// shown in the section's status line: on, off, blocked, failed (with why).
"use strict";
(function () {
  const csrf = (document.querySelector('meta[name="csrf-token"]') || {}).content || "";

  function b64urlToBytes(text) {
    const pad = "=".repeat((4 - (text.length % 4)) % 4);
    const raw = atob((text + pad).replace(/-/g, "+").replace(/_/g, "/"));
    return Uint8Array.from(raw, (c) => c.charCodeAt(0));
  }
  function sameKey(sub, key) {
    const had = sub && sub.options && sub.options.applicationServerKey;
    if (!had) return true; // unknown: keep it
    const a = new Uint8Array(had);
    return a.length === key.length && a.every((v, i) => v === key[i]);
  }
  async function errorOf(r) {
    try {
      const body = await r.json();
      const e = body && body.error;
      if (e && e.message) return `${e.message}${e.field ? ` (field: ${e.field})` : ""}`;
    } catch (e) { /* not JSON */ }
    return `HTTP ${r.status}`;
  }

  function setup(box) {
    const state = box.querySelector("#push-state");
    const on = box.querySelector("#push-on");
    const off = box.querySelector("#push-off");
    const nameField = box.querySelector("#push-device-name");
    const known = box.dataset.serverPush === "1"; // the gateway has a subscription of this device
    let subscriptionId = box.dataset.subscriptionId || "";

    function show(kind, text) {
      box.dataset.state = kind;
      state.textContent = text;
      on.hidden = kind === "on" || kind === "unsupported" || kind === "working";
      off.hidden = kind !== "on";
      on.disabled = off.disabled = kind === "working";
    }

    if (!("serviceWorker" in navigator) || !("PushManager" in window) || !("Notification" in window)) {
      show("unsupported", "Off: this browser cannot receive notifications (no service worker or Push API). On an iPhone, add the page to the Home Screen first, then open it from there.");
      return;
    }
    const ready = () => navigator.serviceWorker.register("/sw.js", { scope: "/" }).then(() => navigator.serviceWorker.ready);

    async function current() {
      if (Notification.permission === "denied") {
        show("blocked", "Blocked: notifications for this site are turned off in the browser's settings. Allow them there, then press “Turn on notifications”.");
        on.hidden = false;
        return;
      }
      const reg = await ready();
      const sub = await reg.pushManager.getSubscription();
      if (sub && known) show("on", "On: this device gets a notification for each request you may decide.");
      else if (sub) show("off", "Off: this browser holds a subscription the gateway does not know (revoked or replaced). Press “Turn on notifications” to give it again.");
      else show("off", "Off: this device gets no notifications.");
    }

    async function turnOn() {
      show("working", "Turning on…");
      const name = nameField ? nameField.value.trim() : "";
      if (nameField && !name) { show("failed", "Failed: give this device a name first (field: Name of this device)."); nameField.focus(); return; }
      const permission = await Notification.requestPermission();
      if (permission === "denied") { show("blocked", "Blocked: you (or the browser) refused notifications for this site. Allow them in the browser's settings."); on.hidden = false; return; }
      if (permission !== "granted") { show("off", "Off: notifications were not allowed."); return; }
      try {
        const reg = await ready();
        const kr = await fetch("/api/v1/push/vapid-public-key", { credentials: "omit", cache: "no-store" });
        if (!kr.ok) throw new Error(`the gateway's push key: ${await errorOf(kr)}`);
        const key = b64urlToBytes((await kr.json()).key);
        let sub = await reg.pushManager.getSubscription();
        if (sub && !sameKey(sub, key)) { await sub.unsubscribe(); sub = null; }
        if (!sub) sub = await reg.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: key });
        const body = sub.toJSON();
        if (name) body.device_name = name;
        const r = await fetch("/api/v1/push/subscriptions", {
          method: "POST", credentials: "same-origin", cache: "no-store",
          headers: { "Content-Type": "application/json", "Accept": "application/json", "X-CSRF-Token": csrf },
          body: JSON.stringify(body),
        });
        if (!r.ok) throw new Error(`the gateway refused the subscription: ${await errorOf(r)}`);
        const made = await r.json();
        subscriptionId = made.id || "";
        box.dataset.subscriptionId = subscriptionId;
        box.dataset.serverPush = "1";
        if (nameField) nameField.closest(".push-name").hidden = true;
        show("on", "On: this device gets a notification for each request you may decide.");
      } catch (e) {
        show("failed", `Failed: ${(e && e.message) || e}`);
      }
    }

    async function turnOff() {
      show("working", "Turning off…");
      try {
        const reg = await ready();
        const sub = await reg.pushManager.getSubscription();
        if (subscriptionId) {
          const r = await fetch(`/api/v1/push/subscriptions/${encodeURIComponent(subscriptionId)}`, {
            method: "DELETE", credentials: "same-origin",
            headers: { "Accept": "application/json", "X-CSRF-Token": csrf },
          });
          // 404: already gone at the gateway. Else say so: the gateway would keep pushing.
          if (!r.ok && r.status !== 404) throw new Error(`the gateway kept the subscription: ${await errorOf(r)}`);
        }
        // Without the browser's subscription the push service refuses the
        // gateway's next push (404/410), and the gateway drops it.
        if (sub) await sub.unsubscribe();
        box.dataset.serverPush = "0";
        show("off", "Off: this device gets no notifications.");
      } catch (e) {
        show("failed", `Failed: ${(e && e.message) || e}`);
      }
    }

    on.addEventListener("click", turnOn);
    off.addEventListener("click", turnOff);
    current().catch((e) => show("failed", `Failed: ${(e && e.message) || e}`));
  }

  document.addEventListener("DOMContentLoaded", () => {
    const box = document.getElementById("push");
    if (box) setup(box);
  });
})();
