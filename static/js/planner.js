// "What does N GiB buy?": answers as the planner types, from the analysis's stored curve
// (the server reads it; this only asks and shows the sentence). Without scripts the form
// submits and the page renders the same answer.
(function () {
  "use strict";
  const form = document.querySelector("form[data-ask]");
  if (!form) return;
  const input = form.querySelector("input[name=buy_gib]");
  const output = form.querySelector("[data-answer]");
  let timer = null;
  let asked = 0;

  function show(text, isError) {
    output.textContent = "";
    const span = document.createElement("span");
    span.textContent = text;
    if (isError) { span.className = "error"; span.setAttribute("role", "alert"); }
    output.appendChild(span);
  }

  async function ask() {
    const value = input.value.trim();
    if (!value) { output.textContent = ""; return; }
    const mine = ++asked;  // only the latest question's answer is shown
    const url = form.dataset.ask + "?buy_gib=" + encodeURIComponent(value);
    let data;
    try {
      const response = await fetch(url, { headers: { Accept: "application/json" }, credentials: "same-origin" });
      data = await response.json();
    } catch (err) {
      if (mine === asked) show("Could not ask: " + err.message, true);
      return;
    }
    if (mine !== asked) return;
    if (data.error) show(data.error, true);
    else show(data.sentence, false);
  }

  form.addEventListener("submit", (event) => { event.preventDefault(); clearTimeout(timer); ask(); });
  input.addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(ask, 250); });
  // A size typed before this script ran (a slow page) is answered now, not lost.
  if (input.value.trim() && !output.textContent.trim()) ask();
})();

// A link to the re-analysis form opens it (a closed <details> hides the field it points to).
(function () {
  "use strict";
  function openForm() {
    const panel = document.getElementById("analysis-form");
    if (panel && location.hash === "#analysis-form") panel.open = true;
  }
  window.addEventListener("hashchange", openForm);
  openForm();
})();
