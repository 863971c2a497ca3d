// Samsa console: the only script. Pages work without it; it refreshes sections
// marked data-live (a group's lag table and chart) in place, from HTML the server
// rendered and escaped. It never throws: every failure is left for the next tick.
"use strict";
(function () {
  function refresh(section) {
    var url = section.getAttribute("data-live") + window.location.search;
    return fetch(url, { headers: { "Accept": "text/html" }, credentials: "same-origin" })
      .then(function (resp) {
        if (!resp.ok) {
          throw new Error("HTTP " + resp.status);
        }
        return resp.text();
      })
      .then(function (html) {
        section.innerHTML = html;
        section.removeAttribute("data-stale");
      })
      .catch(function () {
        section.setAttribute("data-stale", "true");
      });
  }

  function start() {
    var sections = document.querySelectorAll("[data-live]");
    Array.prototype.forEach.call(sections, function (section) {
      var every = parseInt(section.getAttribute("data-interval-ms"), 10);
      if (!(every >= 1000)) {
        every = 5000;
      }
      window.setInterval(function () {
        if (!document.hidden) {
          refresh(section);
        }
      }, every);
    });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
