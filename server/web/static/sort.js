// Click a column header of a .sortable table to sort by it (numbers by data-v, text otherwise).
document.querySelectorAll("table.sortable").forEach(function (table) {
  table.querySelectorAll("thead th").forEach(function (th, col) {
    th.addEventListener("click", function () {
      var body = table.tBodies[0];
      var rows = Array.prototype.slice.call(body.rows);
      var num = th.dataset.type === "num";
      var dir = th.dataset.dir === "asc" ? -1 : 1;
      th.dataset.dir = dir === 1 ? "asc" : "desc";
      rows.sort(function (a, b) {
        var x = a.cells[col], y = b.cells[col];
        if (!x || !y) return 0;
        if (num) {
          var vx = parseFloat(x.textContent);
          var vy = parseFloat(y.textContent);
          if (isNaN(vx) && isNaN(vy)) return 0;
          if (isNaN(vx)) return 1;
          if (isNaN(vy)) return -1;
          return dir * (vx - vy);
        }
        return dir * x.textContent.trim().localeCompare(y.textContent.trim());
      });
      rows.forEach(function (r) { body.appendChild(r); });
    });
  });
});
