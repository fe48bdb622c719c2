/* Small behaviours the templates ask for with data attributes, since the
 * Content-Security-Policy runs no inline script and no on*= handler:
 *   <button data-print>              prints the page
 *   <form data-confirm="Question?">  asks before it is submitted
 *   <form data-compare-least="2">    the compare picker: not sent with fewer analyses
 *                                    ticked (the baseline counts), its
 *                                    [data-compare-refused] note shown instead
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
  document.addEventListener("submit", function (event) {
    var form = event.target;
    var least = form.getAttribute && Number(form.getAttribute("data-compare-least"));
    if (!least) return;
    var chosen = {};  // the server compares the ticked ones and the baseline
    form.querySelectorAll("input[name=a]:checked, input[name=baseline]:checked")
      .forEach(function (box) { chosen[box.value] = true; });
    var refused = form.querySelector("[data-compare-refused]");
    var enough = Object.keys(chosen).length >= least;
    if (refused) refused.hidden = enough;
    if (!enough) event.preventDefault();
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
