
/* memreport: optional sorting and filtering. The page is complete without this script. */
(function () {
  "use strict";
  var bar = document.querySelector("#sites .toolbar");
  if (bar) {
    bar.hidden = false;
    var input = bar.querySelector("input");
    input.addEventListener("input", function () {
      var q = input.value.toLowerCase();
      document.querySelectorAll("#sites details.site").forEach(function (d) {
        d.hidden = q !== "" && d.textContent.toLowerCase().indexOf(q) < 0;
      });
    });
    bar.querySelectorAll("button[data-sort]").forEach(function (btn) {
      btn.addEventListener("click", function () {
        var key = btn.getAttribute("data-sort");
        document.querySelectorAll("#sites [data-list]").forEach(function (list) {
          var items = Array.prototype.slice.call(list.children);
          items.sort(function (a, b) {
            return Number(b.getAttribute("data-" + key)) - Number(a.getAttribute("data-" + key));
          });
          items.forEach(function (el) { list.appendChild(el); });
        });
      });
    });
  }
  /* Click a column head of a sortable table to sort by it (numbers by their data-v or text). */
  document.querySelectorAll("table.sortable").forEach(function (table) {
    var heads = table.querySelectorAll("thead th");
    heads.forEach(function (th, col) {
      th.classList.add("clickable");
      th.addEventListener("click", function () {
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        var desc = th.getAttribute("data-desc") !== "1";
        heads.forEach(function (h) { h.removeAttribute("data-desc"); });
        th.setAttribute("data-desc", desc ? "1" : "0");
        function key(r) {
          var cell = r.cells[col];
          var v = cell.getAttribute("data-v");
          if (v !== null) return Number(v);
          var n = parseFloat(cell.textContent);
          return isNaN(n) ? cell.textContent : n;
        }
        rows.sort(function (a, b) {
          var x = key(a), y = key(b);
          var r = x < y ? -1 : x > y ? 1 : 0;
          return desc ? -r : r;
        });
        rows.forEach(function (r) { body.appendChild(r); });
      });
    });
  });
})();
