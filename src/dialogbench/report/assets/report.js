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
// Hovering a message id shows its text: each text is stored once, in a hidden `.texts`
// block per track, as element text (read with textContent, never run).
(function () {
  "use strict";
  var texts = Object.create(null);
  var stores = document.querySelectorAll(".texts p");
  for (var i = 0; i < stores.length; i++) {
    var p = stores[i];
    texts[p.getAttribute("data-s") + "\u0001" + p.getAttribute("data-m")] = p.textContent;
  }
  document.addEventListener("mouseover", function (e) {
    var el = e.target && e.target.closest ? e.target.closest(".ids > i, .ids > mark") : null;
    if (!el || el.hasAttribute("title")) { return; }
    var item = el.closest("details.item");
    var key = (item ? item.getAttribute("data-subject") : "") + "\u0001" + el.textContent;
    if (key in texts) { el.setAttribute("title", texts[key]); }
  });
})();
