/* Draw the report's figures with plotly.js (no other dependency).
 *
 * Markup, one per figure (console/uploads/charts.py builds the dicts):
 *   {{ figures.mrc|json_script:"fig-mrc" }}
 *   <div class="chart" data-figure="fig-mrc"></div>
 * after <script src="{% static 'vendor/plotly/plotly.min.js' %}"></script>.
 * Each element gets data-drawn="1" once its chart is drawn (data-drawn="error" if not).
 *
 * A chart on screen is drawn at once; one within a viewport height of the screen is drawn
 * next, one at a time in idle moments (requestIdleCallback); the others when scrolling
 * brings them that near (IntersectionObserver). Each costs tens of milliseconds of the
 * main thread, and a page of six drawn at once kept it busy for most of a second before
 * the first screen could be used. The margin is generous so that scrolling finds the next
 * charts drawn already; a chart scrolled onto the screen before its turn is drawn at
 * once; the boxes keep their height (CSS min-height) while empty.
 * A chart in a closed <details> or a hidden tab has no box: it is drawn when it is shown.
 * Before printing, every chart not drawn yet is drawn. Without IntersectionObserver,
 * every chart is drawn at once, those on screen first.
 */
(function () {
  "use strict";

  function fail(el, message) {
    delete el.dataset.drawing;
    el.textContent = message;
    el.classList.add("chart-error");
    el.setAttribute("role", "alert");
    el.dataset.drawn = "error";
  }

  function draw(el) {
    if (el.dataset.drawn || el.dataset.drawing) return;
    el.dataset.drawing = "1";
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
        delete el.dataset.drawing;
        el.dataset.drawn = "1";
      },
      function (err) {
        fail(el, "The chart could not be drawn.");
        if (window.console) window.console.error(err);
      }
    );
  }

  function drawSafely(el) {
    try {
      draw(el);
    } catch (err) {
      fail(el, "The chart could not be drawn.");
      if (window.console) window.console.error(err);
    }
  }

  function onScreen(el) {
    var box = el.getBoundingClientRect();
    var height = window.innerHeight || document.documentElement.clientHeight;
    return box.height > 0 && box.top < height && box.bottom > 0;
  }

  // the charts near the screen, one an idle moment: the first screen is usable, and input
  // waits at most for one chart (at most a second: then it is drawn anyway)
  var queue = [];
  var scheduled = false;
  var later =
    typeof window.requestIdleCallback === "function"
      ? function (fn) {
          window.requestIdleCallback(fn, { timeout: 1000 });
        }
      : function (fn) {
          window.setTimeout(fn, 0);
        };
  function drawQueued() {
    scheduled = false;
    // skip those drawn meanwhile (scrolled onto the screen, printed)
    while (queue.length && queue[0].dataset.drawn) queue.shift();
    if (queue.length) drawSafely(queue.shift());
    if (queue.length) schedule();
  }
  function schedule() {
    if (scheduled) return;
    scheduled = true;
    later(drawQueued);
  }

  function start() {
    var elements = Array.prototype.slice.call(document.querySelectorAll("[data-figure]"));
    if (!elements.length) return;
    if (!window.Plotly || typeof window.Plotly.newPlot !== "function") {
      elements.forEach(function (el) {
        fail(el, "Charts are unavailable: plotly.js did not load.");
      });
      return;
    }
    // printing shows every chart: draw the rest now (newPlot lays a chart out at once)
    window.addEventListener("beforeprint", function () {
      elements.forEach(drawSafely);
    });

    if (typeof window.IntersectionObserver !== "function") {
      // every chart at once, as before: those on screen, a paint, then the others
      var rest = [];
      elements.forEach(function (el) {
        if (onScreen(el)) drawSafely(el);
        else rest.push(el);
      });
      if (rest.length) {
        window.setTimeout(function () {
          rest.forEach(drawSafely);
        }, 0);
      }
      return;
    }

    // on screen: drawn now (the observer calls back after the page's first layout)
    var visible = new window.IntersectionObserver(function (entries) {
      entries.forEach(function (entry) {
        if (!entry.isIntersecting) return;
        visible.unobserve(entry.target);
        drawSafely(entry.target);
      });
    });
    // within one viewport height of the screen: drawn next, one at a time
    var near = new window.IntersectionObserver(
      function (entries) {
        entries.forEach(function (entry) {
          if (!entry.isIntersecting) return;
          near.unobserve(entry.target);
          if (!entry.target.dataset.drawn) queue.push(entry.target);
        });
        if (queue.length) schedule();
      },
      { rootMargin: "100% 0px" }
    );
    elements.forEach(function (el) {
      visible.observe(el);
      near.observe(el);
    });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
