// Live status: every element [data-submission][data-status] still queued or running is asked
// about at /submissions/status.json; when one moves, the page is fetched again and its <main>
// swapped in, so scores and problems appear without a reload. Stops once every run is final.
(function () {
  "use strict";
  var PENDING = { queued: true, running: true };
  var tries = 0;
  var me = document.currentScript;
  var endpoint = (me && me.getAttribute("data-status-url")) || "/submissions/status.json";

  function pending() {
    var ids = [];
    document.querySelectorAll("[data-submission][data-status]").forEach(function (el) {
      if (PENDING[el.getAttribute("data-status")]) ids.push(el.getAttribute("data-submission"));
    });
    return ids;
  }

  function swapMain() {
    return fetch(location.href, { credentials: "same-origin", cache: "no-store" })
      .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
      .then(function (html) {
        var doc = new DOMParser().parseFromString(html, "text/html");
        var fresh = doc.querySelector("main");
        if (fresh) document.querySelector("main").replaceWith(fresh);
      });
  }

  function poll() {
    var ids = pending();
    if (!ids.length || ++tries > 900) return; // final, or half an hour of asking
    setTimeout(function () {
      var url = endpoint + "?ids=" + encodeURIComponent(ids.join(","));
      fetch(url, { credentials: "same-origin", cache: "no-store" })
        .then(function (r) { return r.ok ? r.json() : Promise.reject(r.status); })
        .then(function (body) {
          var moved = ids.some(function (id) {
            var now = body.statuses[id];
            var el = document.querySelector('[data-submission="' + id + '"][data-status]');
            return now && el && now !== el.getAttribute("data-status");
          });
          return moved ? swapMain() : null;
        })
        .then(poll, poll);
    }, tries < 10 ? 1000 : 3000);
  }

  poll();
})();
