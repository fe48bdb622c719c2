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
    // The charts on screen first, the others in a second task: the browser paints the
    // first screen in between instead of after every chart is done (each costs 50-150 ms
    // of the main thread), and the rest still come in one go (a task and a paint per
    // chart made the last one later).
    var height = window.innerHeight || document.documentElement.clientHeight;
    var now = [];
    var later = [];
    elements.forEach(function (el) {
      var box = el.getBoundingClientRect();
      (box.top < height && box.bottom > 0 ? now : later).push(el);
    });
    function drawEach(list) {
      list.forEach(function (el) {
        try {
          draw(el);
        } catch (err) {
          fail(el, "The chart could not be drawn.");
          if (window.console) window.console.error(err);
        }
      });
    }
    drawEach(now);
    if (later.length) {
      window.setTimeout(function () {
        drawEach(later);
      }, 0);
    }
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", drawAll);
  } else {
    drawAll();
  }
})();
