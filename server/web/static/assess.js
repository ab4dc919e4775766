// The assessment page's keys: 1..9 press the label button with that key (which submits the
// judgment and goes on), J or the right arrow opens the next item, K or the left arrow the
// previous one. Nothing happens while a text field has the focus or with a modifier key held;
// without this script the page works the same with clicks.
(function () {
  "use strict";
  var form = document.getElementById("judge");
  if (!form) return;
  function follow(id) {
    var a = document.getElementById(id);
    if (a) window.location.assign(a.href);
  }
  document.addEventListener("keydown", function (e) {
    if (e.defaultPrevented || e.altKey || e.ctrlKey || e.metaKey) return;
    var t = e.target;
    if (t && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName))) return;
    var key = e.key;
    if (/^[1-9]$/.test(key)) {
      var b = form.querySelector('button[data-key="' + key + '"]');
      if (b) {
        e.preventDefault();
        if (form.requestSubmit) form.requestSubmit(b);
        else b.click();
      }
    } else if (key === "j" || key === "J" || key === "ArrowRight") {
      e.preventDefault();
      follow("next-item");
    } else if (key === "k" || key === "K" || key === "ArrowLeft") {
      e.preventDefault();
      follow("prev-item");
    }
  });
})();
