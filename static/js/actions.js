/* Small behaviours the templates ask for with data attributes, since the
 * Content-Security-Policy runs no inline script and no on*= handler:
 *   <button data-print>              prints the page
 *   <form data-confirm="Question?">  asks before it is submitted
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
})();
