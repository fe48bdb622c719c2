// Live progress of a background job: polls the status URL, updates the bar, the rate and
// the time left, and reloads the page when the job is finished. No full reloads before.
// A finished ingest goes to its first analysis instead (the status's analysis_url), with
// the page's #fragment carried over: the bundled sample lands on #recommendation.
(function () {
  "use strict";
  const panel = document.querySelector("[data-progress]");
  if (!panel) return;
  const url = panel.dataset.statusUrl;
  const $ = (sel) => panel.querySelector(sel);
  const fmtBytes = (n) => {
    const units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let i = 0;
    while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
    return (i ? n.toFixed(1) : n.toFixed(0)) + " " + units[i];
  };
  const fmtTime = (s) => {
    if (!isFinite(s) || s < 0) return "—";
    if (s < 60) return Math.ceil(s) + " s";
    if (s < 3600) return Math.floor(s / 60) + " min " + Math.round(s % 60) + " s";
    return Math.floor(s / 3600) + " h " + Math.round((s % 3600) / 60) + " min";
  };
  const STAGES = {
    reading: "Reading, tokenizing and hashing",
    writing: "Writing the block stream",
    analyzing: "Analyzing",
    loading: "Loading the block stream",
    done: "Done",
  };
  let delay = 700;
  async function poll() {
    let data;
    try {
      const response = await fetch(url, { headers: { Accept: "application/json" }, credentials: "same-origin" });
      if (!response.ok) throw new Error("HTTP " + response.status);
      data = await response.json();
    } catch (err) {
      $("[data-status]").textContent = "Connection lost, retrying… (" + err.message + ")";
      delay = Math.min(delay * 2, 10000);
      return setTimeout(poll, delay);
    }
    delay = 700;
    const share = data.total > 0 ? Math.min(1, data.done / data.total) : 0;
    $("[data-fill]").style.width = (share * 100).toFixed(1) + "%";
    $("[data-stage]").textContent = STAGES[data.stage] || data.stage || "Queued";
    $("[data-status]").textContent = data.status_display;
    // the page's status badge, drawn with the page, says what the panel says (a job queued
    // then is running now)
    for (const badge of document.querySelectorAll("[data-job-status]")) {
      badge.textContent = data.status_display;
      badge.className = "badge " + data.status;
    }
    const bytesStage = data.stage === "reading";
    $("[data-done]").textContent = data.total > 0
      ? (bytesStage ? fmtBytes(data.done) + " of " + fmtBytes(data.total) : data.done + " of " + data.total + " steps")
      : "—";
    if (data.started_at && data.done > 0 && bytesStage) {
      const elapsed = (Date.now() - Date.parse(data.started_at)) / 1000;
      const rate = data.done / Math.max(elapsed, 0.001);
      $("[data-rate]").textContent = fmtBytes(rate) + "/s";
      $("[data-eta]").textContent = fmtTime((data.total - data.done) / rate);
    }
    // the panel's counters and the page's details box (data-live-*) show the same numbers
    const counts = [["[data-requests], [data-live-requests]", data.requests],
                    ["[data-skipped], [data-live-skipped]", data.skipped]];
    for (const [selector, value] of counts) {
      if (value === undefined) continue;
      for (const el of document.querySelectorAll(selector)) el.textContent = value.toLocaleString("en-US");
    }
    // stalled: the worker stopped beating; the page then says so and offers Retry
    if (data.finished || data.stalled) {
      panel.dataset.finished = data.status;
      if (data.analysis_url) window.location.assign(data.analysis_url + window.location.hash);
      else window.location.reload();
      return;
    }
    setTimeout(poll, delay);
  }
  poll();
})();
