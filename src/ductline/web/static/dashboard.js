// ductline dashboard: countdowns, ages, live updates. No build step, no framework.
(function () {
  "use strict";
  var body = document.body;
  // Times on the page come from the database clock; measure this browser against it.
  var serverNow = Number(body.dataset.nowMs || 0);
  var offset = serverNow ? serverNow - Date.now() : 0;
  function now() { return Date.now() + offset; }

  function span(ms) {
    ms = Math.max(0, Math.round(ms));
    var s = Math.floor(ms / 1000);
    if (s < 60) return s + " s";
    if (s < 3600) return Math.floor(s / 60) + " m " + String(s % 60).padStart(2, "0") + " s";
    if (s < 86400) return Math.floor(s / 3600) + " h " + String(Math.floor(s % 3600 / 60)).padStart(2, "0") + " m";
    return Math.floor(s / 86400) + " d " + Math.floor(s % 86400 / 3600) + " h";
  }

  function tick() {
    var t = now();
    document.querySelectorAll("[data-until-ms]").forEach(function (el) {
      var left = Number(el.dataset.untilMs) - t;
      el.textContent = left > 0 ? "in " + span(left) : "due " + span(-left) + " ago";
      el.classList.toggle("due", left <= 0);
    });
    document.querySelectorAll("[data-since-ms]").forEach(function (el) {
      var ago = t - Number(el.dataset.sinceMs);
      el.textContent = el.classList.contains("elapsed") ? "running " + span(ago) : "(" + span(ago) + " ago)";
    });
  }
  if (serverNow) { tick(); setInterval(tick, 1000); }

  // Destructive forms ask first.
  document.querySelectorAll("form[data-confirm]").forEach(function (form) {
    form.addEventListener("submit", function (event) {
      if (!window.confirm(form.dataset.confirm)) event.preventDefault();
    });
  });

  // Keep the page current without losing what the reader opened.
  function userIsReading() {
    return document.querySelector("details[open]:not(.keep-open)") !== null ||
      (window.getSelection && String(window.getSelection()).length > 0);
  }
  var pending = null;
  function refresh() {
    if (pending) return;
    pending = setTimeout(function () {
      pending = null;
      if (userIsReading()) {
        var note = document.getElementById("live");
        if (note) note.hidden = false;
      } else {
        window.location.reload();
      }
    }, 1000);
  }

  var eventsUrl = body.dataset.eventsUrl;
  if (eventsUrl && window.EventSource) {
    var source = new EventSource(eventsUrl);
    ["workflow_start", "step_start", "step_end"].forEach(function (name) {
      source.addEventListener(name, refresh);
    });
    source.addEventListener("workflow_end", function () { source.close(); refresh(); });
  }

  var every = Number(body.dataset.autorefreshSeconds || 0);
  if (every > 0) {
    setInterval(function () {
      if (document.visibilityState === "visible" && !userIsReading()) window.location.reload();
    }, every * 1000);
  }
})();
