"use strict";
// Says why the last login did not work (the server redirects with ?login=...).
document.addEventListener("DOMContentLoaded", () => {
  const why = new URLSearchParams(location.search).get("login");
  const message = document.getElementById("message");
  if (why === "failed") {
    message.textContent = "That is not the API key or the dashboard token.";
    message.hidden = false;
  } else if (why === "busy") {
    message.textContent = "Too many failed logins: wait a minute.";
    message.hidden = false;
  }
});
