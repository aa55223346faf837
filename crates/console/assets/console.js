// dgw console: the only script (no inline script: the CSP forbids it).
// On the decisions page, "Live" refreshes the live table every 3 seconds
// by fetching the same page and swapping the table's rows (the server
// escaped every value; nothing here builds HTML from text).
"use strict";
(function () {
  const live = document.getElementById("live");
  const table = document.getElementById("live-table");
  if (!live || !table) return;
  async function refresh() {
    if (!live.checked) return;
    try {
      const answer = await fetch(window.location.href, { credentials: "same-origin", redirect: "error" });
      if (!answer.ok) return;
      const doc = new DOMParser().parseFromString(await answer.text(), "text/html");
      const rows = doc.querySelector("#live-table tbody");
      const mine = table.querySelector("tbody");
      if (rows && mine) mine.replaceWith(document.adoptNode(rows));
    } catch (e) {
      // Signed out or unreachable: the next page load says which.
    }
  }
  setInterval(refresh, 3000);
})();
