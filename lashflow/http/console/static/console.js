// lashflow console: live updates, nothing else. Pages are rendered (and escaped) by the
// server; this script only hears that something changed and puts server-rendered HTML in
// place. The run page and the runs list listen to the run's (or every run's) events, a
// Server-Sent Events stream from the journal: the browser reconnects by itself, with the
// last event id it saw, so nothing is missed across a server restart. The inbox polls.
"use strict";

const EVERY_MS = 2000;
const SETTLE_MS = 120;  // events that come together cause one refresh
const KINDS = ["run", "step", "attempt", "print", "yield"];

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

async function refreshMain() {
  const response = await fetch(window.location.href, { credentials: "same-origin" });
  if (!response.ok) return;
  const page = new DOMParser().parseFromString(await response.text(), "text/html");
  const fresh = page.querySelector("main");
  const main = document.querySelector("main");
  if (fresh && main) main.replaceChildren(...fresh.childNodes);  // server-rendered: text
  document.body.dataset.refreshed = String(Number(document.body.dataset.refreshed || 0) + 1);
}

function listen(url, refresh) {
  let timer = null;
  const source = new EventSource(url, { withCredentials: true });
  const changed = () => {
    if (timer === null) {
      timer = setTimeout(() => { timer = null; refresh().catch(() => {}); }, SETTLE_MS);
    }
  };
  for (const kind of KINDS) source.addEventListener(kind, changed);
  return source;
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
  if (rows && rows.dataset.events) {
    listen(rows.dataset.events, () => refreshRows(rows));
  }
  const run = document.getElementById("run");
  if (run && run.dataset.events) {
    listen(`${run.dataset.events}?after=${encodeURIComponent(run.dataset.after || "0")}`,
           refreshMain);
  }
  const inbox = document.getElementById("inbox");
  if (inbox && inbox.dataset.state) {
    const snapshot = {};
    every(() => reloadWhenChanged(inbox, snapshot));
  }
});
