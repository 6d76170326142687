"use strict";
// Logs in with fetch, so the session's secret in the answer's body can be kept in this
// tab's sessionStorage (scoped to this origin: scheme, host and port), where the app
// takes it from for every API call. Whatever the server answers otherwise (a wrong key,
// too many failed logins from this address, a cross-site refusal) is shown as it says.
document.addEventListener("DOMContentLoaded", () => {
  const form = document.getElementById("login");
  const message = document.getElementById("message");
  const say = (text) => {
    message.textContent = text;
    message.hidden = false;
  };
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const button = form.querySelector("button");
    button.disabled = true;
    try {
      const r = await fetch("/dashboard/login", {
        method: "POST",
        headers: { "Content-Type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams(new FormData(form)).toString(),
      });
      const body = await r.json().catch(() => ({}));
      if (r.ok && body.secret) {
        sessionStorage.setItem("herald-dashboard-secret", body.secret);
        location.replace((body.next || "/dashboard/") + location.hash);
        return;
      }
      say(body.error || "The login failed (" + r.status + " " + r.statusText + ").");
    } catch (e) {
      say("herald can not be reached: " + e.message);
    } finally {
      button.disabled = false;
    }
  });
});
