/* memreport batch index: sorting by a column, without a framework. The table is complete and
 * readable without this script. */
(function () {
  "use strict";
  document.querySelectorAll("th[data-k]").forEach(function (th) {
    th.tabIndex = 0;
    function value(cell) {
      return cell.hasAttribute("data-v") ? cell.getAttribute("data-v") : cell.textContent;
    }
    function sort() {
      var i = th.cellIndex, body = th.closest("table").tBodies[0];
      var rows = Array.prototype.slice.call(body.rows);
      var numeric = th.getAttribute("data-k") === "n";
      var dir = th.getAttribute("data-d") === "a" ? -1 : 1;
      th.setAttribute("data-d", dir === 1 ? "a" : "d");
      rows.sort(function (a, b) {
        var u = value(a.cells[i]), v = value(b.cells[i]);
        if (numeric) {
          u = parseFloat(u);
          v = parseFloat(v);
          if (isNaN(u)) u = -1;
          if (isNaN(v)) v = -1;
          return (u - v) * dir;
        }
        return u.localeCompare(v) * dir;
      });
      rows.forEach(function (r) { body.appendChild(r); });
    }
    th.addEventListener("click", sort);
    th.addEventListener("keydown", function (e) {
      if (e.key === "Enter" || e.key === " ") {
        e.preventDefault();
        sort();
      }
    });
  });
})();
