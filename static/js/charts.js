/* Draw the report's figures with plotly.js (no other dependency).
 *
 * Markup, one per figure (console/charts.py builds the dicts):
 *   {{ figures.mrc|json_script:"fig-mrc" }}
 *   <div class="chart" data-figure="fig-mrc"></div>
 * after <script src="{% static 'vendor/plotly/plotly.min.js' %}"></script>.
 * Each element gets data-drawn="1" once its chart is drawn (data-drawn="error" if not).
 */
(function () {
  "use strict";

  function fail(el, message) {
    el.textContent = message;
    el.classList.add("chart-error");
    el.setAttribute("role", "alert");
    el.dataset.drawn = "error";
  }

  function draw(el) {
    var id = el.getAttribute("data-figure");
    var source = id ? document.getElementById(id) : null;
    if (!source) {
      fail(el, "Chart data not found.");
      return;
    }
    var fig;
    try {
      fig = JSON.parse(source.textContent);
    } catch (err) {
      fail(el, "Chart data could not be read.");
      return;
    }
    if (!fig || !fig.data) {
      fail(el, "No chart for this report.");
      return;
    }
    var config = { responsive: true, displaylogo: false };
    Promise.resolve(window.Plotly.newPlot(el, fig.data, fig.layout || {}, config)).then(
      function () {
        el.dataset.drawn = "1";
      },
      function (err) {
        fail(el, "The chart could not be drawn.");
        if (window.console) window.console.error(err);
      }
    );
  }

  function drawAll() {
    var elements = document.querySelectorAll("[data-figure]");
    if (!elements.length) return;
    if (!window.Plotly || typeof window.Plotly.newPlot !== "function") {
      elements.forEach(function (el) {
        fail(el, "Charts are unavailable: plotly.js did not load.");
      });
      return;
    }
    // Charts on screen first, then the rest, each in a task of its own: drawing one costs
    // 50-150 ms of the page's main thread, and between two the browser paints what is
    // drawn instead of showing nothing until the last chart is done.
    var list = Array.prototype.slice.call(elements);
    var height = window.innerHeight || document.documentElement.clientHeight;
    var onScreen = function (el) {
      var box = el.getBoundingClientRect();
      return box.top < height && box.bottom > 0 ? 0 : 1;
    };
    list.sort(function (a, b) {
      return onScreen(a) - onScreen(b);
    });
    var next = 0;
    function drawNext() {
      var el = list[next++];
      if (!el) return;
      try {
        draw(el);
      } catch (err) {
        fail(el, "The chart could not be drawn.");
        if (window.console) window.console.error(err);
      }
      window.setTimeout(drawNext, 0);
    }
    drawNext();
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", drawAll);
  } else {
    drawAll();
  }
})();
