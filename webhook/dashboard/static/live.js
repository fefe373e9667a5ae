// tugboat dashboard: live updates. The pages are complete without this
// script; with it, a change on the hub (a Server-Sent Event from /events)
// fetches the page again and swaps its <main>, keeping focus, what was
// typed and the details (diffs) that were open. Soak countdowns tick every second.
(function () {
  "use strict";
  var eventsURL = document.body.getAttribute("data-events");
  var pending = null;
  var busy = false;
  var refreshes = 0;

  function fieldsOf(root) {
    var out = {};
    root.querySelectorAll("input[id], textarea[id]").forEach(function (el) {
      if (el.type !== "hidden") { out[el.id] = el.value; }
    });
    return out;
  }

  function refresh() {
    pending = null;
    if (busy) { schedule(); return; }
    busy = true;
    fetch(window.location.href, { headers: { "Accept": "text/html" }, credentials: "same-origin", cache: "no-store" })
      // An error is a page too (e.g. the Promotion was deleted): show it.
      .then(function (r) { return r.text(); })
      .then(function (html) {
        var doc = new DOMParser().parseFromString(html, "text/html");
        var next = doc.getElementById("main");
        var main = document.getElementById("main");
        if (!next || !main) { return; }
        if (next.innerHTML === main.innerHTML) { done(); return; }
        var focused = document.activeElement && document.activeElement.id;
        var fields = fieldsOf(main);
        var open = Array.prototype.map.call(main.querySelectorAll("details[id][open]"), function (el) { return el.id; });
        main.replaceChildren.apply(main, Array.prototype.slice.call(next.childNodes).map(function (n) { return document.importNode(n, true); }));
        Object.keys(fields).forEach(function (id) {
          var el = document.getElementById(id);
          if (el) { el.value = fields[id]; }
        });
        // A diff someone opened stays open.
        open.forEach(function (id) {
          var el = document.getElementById(id);
          if (el && el.tagName === "DETAILS") { el.open = true; }
        });
        if (focused) {
          var f = document.getElementById(focused);
          if (f) { f.focus(); }
        }
        var live = doc.getElementById("live");
        if (live) { document.getElementById("live").innerHTML = live.innerHTML; }
        document.title = doc.title;
        tick();
        done();
      })
      .catch(function () {})
      .finally(function () { busy = false; });
  }

  // done counts the refreshes on the body, for those who wait for one.
  function done() {
    refreshes += 1;
    document.body.setAttribute("data-refreshed", String(refreshes));
  }

  function schedule() {
    if (pending === null) { pending = window.setTimeout(refresh, 50); }
  }

  function tick() {
    var now = Date.now();
    document.querySelectorAll("time[data-until]").forEach(function (el) {
      var left = Math.max(0, Math.round((Date.parse(el.getAttribute("data-until")) - now) / 1000));
      var m = Math.floor(left / 60), s = left % 60;
      el.textContent = (m > 0 ? m + "m" + (s < 10 ? "0" : "") : "") + s + "s";
    });
  }

  if (window.EventSource && eventsURL) {
    var source = new EventSource(eventsURL);
    source.addEventListener("change", schedule);
    // Changes may have happened between the page's rendering and the
    // stream's (re)connection: fetch once whenever it opens.
    source.addEventListener("open", function () { document.body.setAttribute("data-live", "open"); schedule(); });
    source.addEventListener("error", function () { document.body.setAttribute("data-live", "reconnecting"); });
  }
  window.setInterval(tick, 1000);
})();
