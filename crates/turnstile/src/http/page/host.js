// turnstile panel/1: the host's side of the embedding contract
// (docs/embedding.md). A host app mounts the panel in an <iframe> and hands
// this script an adapter of the nine methods it honestly has; the panel
// calls them over postMessage. Messages from anything but the mounted
// panel's window and origin are ignored, and each is checked on arrival.
//
//   const panel = TurnstilePanel.mount({ frame, adapter, capabilities: { viewer: true }, locale: "en" });
//   panel.push("authToken", "…");   // a host-initiated update
(function () {
  "use strict";
  const CONTRACT = "panel/1";
  const METHODS = ["getFacilityKey", "getAuthToken", "getLicenseTierSet", "getCurrentSurfaceId", "getViewerSnapshot",
    "dispatchCitation", "subscribeViewerState", "resolveDeepLink", "getIsAdmin"];
  const EVENTS = ["viewerState", "authToken", "locale", "licenseTiers"];

  function mount(opts) {
    const frame = opts.frame;
    const adapter = opts.adapter || {};
    const panelOrigin = new URL(frame.src, location.href).origin;
    const capabilities = { viewer: !!(opts.capabilities && opts.capabilities.viewer) };
    const locale = typeof opts.locale === "string" ? opts.locale : null;
    const implemented = METHODS.filter((m) => typeof adapter[m] === "function");
    const post = (msg) => {
      if (frame.contentWindow) frame.contentWindow.postMessage(Object.assign({ turnstile: CONTRACT }, msg), panelOrigin);
    };
    let unsubscribe = null;
    const onMessage = async (e) => {
      if (e.source !== frame.contentWindow || e.origin !== panelOrigin) return;
      const m = e.data;
      if (!m || typeof m !== "object" || m.turnstile !== CONTRACT || typeof m.kind !== "string") return;
      if (m.kind === "hello") { post({ kind: "hello", implements: implemented, capabilities, locale }); return; }
      if (m.kind !== "call" || typeof m.id !== "string" || m.id.length > 64) return;
      if (!implemented.includes(m.method)) {
        post({ kind: "result", id: m.id, ok: false, error: `this host does not implement ${String(m.method).slice(0, 40)}` });
        return;
      }
      const args = Array.isArray(m.args) ? m.args.slice(0, 4) : [];
      try {
        let value;
        if (m.method === "subscribeViewerState") {
          if (unsubscribe) unsubscribe();
          const u = adapter.subscribeViewerState((state) => post({ kind: "event", name: "viewerState", value: state }));
          unsubscribe = typeof u === "function" ? u : null;
          value = true;
        } else {
          value = await adapter[m.method](...args);
        }
        post({ kind: "result", id: m.id, ok: true, value: value === undefined ? null : value });
      } catch (err) {
        post({ kind: "result", id: m.id, ok: false, error: String((err && err.message) || err).slice(0, 200) });
      }
    };
    window.addEventListener("message", onMessage);
    // Said at once and on each load of the frame: a panel that loaded
    // before the host mounted, or reloaded, hears from its host.
    const hello = () => post({ kind: "hello", implements: implemented, capabilities, locale });
    frame.addEventListener("load", hello);
    hello();
    return {
      implemented,
      // A host-initiated update: a new token, a locale, a tier set, or the
      // viewer's state outside a subscription.
      push(name, value) {
        if (!EVENTS.includes(name)) throw new Error(`panel/1 has no event ${name}`);
        post({ kind: "event", name, value });
      },
      unmount() {
        window.removeEventListener("message", onMessage);
        frame.removeEventListener("load", hello);
        if (unsubscribe) unsubscribe();
      },
    };
  }

  window.TurnstilePanel = { CONTRACT, METHODS, EVENTS, mount };
})();
