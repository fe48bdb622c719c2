/* Small behaviours the templates ask for with data attributes, since the
 * Content-Security-Policy runs no inline script and no on*= handler:
 *   <button data-print>              prints the page
 *   <form data-confirm="Question?">  asks before it is submitted
 * and, for the block-size checkboxes (name="block_sizes"), "the format's own" (value 0)
 * and sizes of one's own exclude each other: ticking one unticks the other kind.
 */
(function () {
  "use strict";
  document.addEventListener("click", function (event) {
    var button = event.target.closest && event.target.closest("[data-print]");
    if (button) window.print();
  });
  document.addEventListener("submit", function (event) {
    var form = event.target;
    var question = form.getAttribute && form.getAttribute("data-confirm");
    if (question && !window.confirm(question)) event.preventDefault();
  });
  document.addEventListener("change", function (event) {
    var box = event.target;
    if (!box.matches || !box.matches("input[type=checkbox][name=block_sizes]")) return;
    if (!box.checked || !box.form) return;
    var own = box.value === "0";
    box.form.querySelectorAll("input[type=checkbox][name=block_sizes]").forEach(function (other) {
      if (other !== box && (other.value === "0") !== own) other.checked = false;
    });
  });
})();
