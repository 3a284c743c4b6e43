// lashflow console: live refresh, nothing else. Pages are rendered (and escaped) by the
// server; this script only fetches what changed and puts server-rendered HTML in place.
"use strict";

const EVERY_MS = 2000;

async function refreshRows(tbody) {
  const response = await fetch(tbody.dataset.refresh, { credentials: "same-origin" });
  if (response.ok) {
    const html = await response.text();
    if (html !== tbody.dataset.last) {
      tbody.dataset.last = html;
      tbody.innerHTML = html;  // server-rendered with autoescape: values are text
    }
  }
}

async function reloadWhenChanged(element, snapshot) {
  const response = await fetch(element.dataset.state, { credentials: "same-origin" });
  if (!response.ok) return;
  const now = JSON.stringify(await response.json());
  if (snapshot.value === undefined) snapshot.value = now;
  else if (now !== snapshot.value) window.location.reload();
}

function every(task) {
  const tick = () => task().catch(() => {}).finally(() => setTimeout(tick, EVERY_MS));
  setTimeout(tick, EVERY_MS);
}

document.addEventListener("DOMContentLoaded", () => {
  const rows = document.getElementById("run-rows");
  if (rows) every(() => refreshRows(rows));
  for (const id of ["run", "inbox"]) {
    const element = document.getElementById(id);
    if (element && element.dataset.state) {
      const snapshot = {};
      every(() => reloadWhenChanged(element, snapshot));
    }
  }
});
