// The demo hosts' adapters (issue 38 §6). Each implements only what it
// honestly has: the viewer all nine methods of panel/1 (its token is the
// one signed in, or none), the console names,
// its own routes and no viewer. Nothing here navigates: a citation moves
// the fake camera, or pushes a route without reloading.
"use strict";
const kind = document.body.dataset.kind;
const $ = (id) => document.getElementById(id);
const frame = $("panel");
const FACILITY = "demo-site";
const fmt = (v) => JSON.stringify(v);
const logDispatch = (payload) => {
  const li = document.createElement("li");
  li.dataset.testid = "dispatched";
  li.textContent = fmt(payload);
  $("log").append(li);
};

let adapter, capabilities;
if (kind === "viewer") {
  let panorama = null, camera = { position: [0, 0, 1.6], look_at: [5, 0, 1.6], direction: [1, 0, 0] }, grid = null;
  const listeners = new Set();
  const floor = () => Number($("floor").value);
  // The surface is the floor the viewer shows, by the id a cited item gives it.
  const surface = () => String(floor());
  const visible = () => Array.from({ length: Number($("crowd").value) }, (_, i) => `ANN-${floor()}-${String(i + 1).padStart(3, "0")}`);
  const snapshot = () => ({ project: $("project").value, floor: floor(), surface: surface(), panorama,
    selected: panorama ? [panorama] : [], visible: visible(), camera });
  const paint = () => {
    $("panorama").textContent = panorama ?? "none";
    $("surface").textContent = surface();
    $("grid").textContent = grid ? `${grid.x ?? "?"} / ${grid.y ?? "?"}${grid.z ? ` (${grid.z})` : ""}` : "unknown";
    $("cam-pos").textContent = fmt(camera.position);
    $("cam-look").textContent = fmt(camera.look_at);
    $("cam-dir").textContent = fmt(camera.direction);
  };
  const changed = () => { paint(); for (const cb of listeners) cb(snapshot()); };
  for (const id of ["project", "floor", "crowd"]) $(id).addEventListener("change", () => { panorama = null; grid = null; changed(); });
  paint();
  capabilities = { viewer: true };
  // The viewer's sign-in (`turnstile demo --auth` prints its users' tokens):
  // kept for this tab only; the panel is mounted again to take it.
  const TOKEN = "demo-host-token";
  $("sign-in").addEventListener("click", () => {
    const t = $("token").value.trim();
    $("token").value = "";
    if (t) sessionStorage.setItem(TOKEN, t); else sessionStorage.removeItem(TOKEN);
    frame.src = "/";
  });
  adapter = {
    getAuthToken: () => sessionStorage.getItem(TOKEN),
    getFacilityKey: () => FACILITY,
    getLicenseTierSet: () => ["basic", "pro"],
    getCurrentSurfaceId: () => surface(),
    getViewerSnapshot: () => snapshot(),
    getIsAdmin: () => true,
    subscribeViewerState(cb) { listeners.add(cb); return () => listeners.delete(cb); },
    // The viewer's command API: go to the cited place, look where it looked.
    dispatchCitation(p) {
      logDispatch(p);
      const s = p.scope || {};
      if (s.project && [...$("project").options].some((o) => o.value === s.project)) $("project").value = s.project;
      if (s.surface != null && [...$("floor").options].some((o) => o.value === String(s.surface))) $("floor").value = String(s.surface);
      panorama = s.panorama ?? null;
      grid = p.axes ?? null;
      if (p.camera) camera = p.camera;
      changed();
      return { shown: true };
    },
    resolveDeepLink(p) {
      const s = p.scope || {};
      return { label: [s.panorama, s.surface != null ? `floor ${s.surface}` : null, p.axes ? `grid ${p.axes.x ?? "?"}/${p.axes.y ?? "?"}` : null].filter(Boolean).join(" · ") };
    },
  };
} else {
  capabilities = { viewer: false };
  const route = (s) => ["/projects", s.project, s.surface != null ? `floors/${s.surface}` : null, s.panorama ? `panoramas/${s.panorama}` : null]
    .filter((x) => x != null).join("/");
  adapter = {
    getFacilityKey: () => FACILITY,
    getViewerSnapshot: () => ({ project: "tower-a" }),
    // Routing only: the console has no camera; the URL changes, the
    // document does not reload.
    dispatchCitation(p) {
      logDispatch(p);
      const r = route(p.scope || {});
      $("route").textContent = r;
      history.pushState({ route: r }, "", `?route=${encodeURIComponent(r)}`);
      return { routed: r };
    },
    resolveDeepLink: (p) => ({ label: route(p.scope || {}) }),
  };
}
window.demoHost = TurnstilePanel.mount({ frame, adapter, capabilities, locale: document.documentElement.lang || "en" });
