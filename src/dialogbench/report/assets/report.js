// Filter the drill-down: hide item groups whose text does not contain the query.
(function () {
  "use strict";
  var box = document.getElementById("filter");
  if (!box) { return; }
  box.addEventListener("input", function () {
    var q = box.value.toLowerCase();
    var items = document.querySelectorAll("details.item");
    for (var i = 0; i < items.length; i++) {
      var hit = !q || items[i].textContent.toLowerCase().indexOf(q) >= 0;
      items[i].classList.toggle("hidden", !hit);
    }
  });
})();
