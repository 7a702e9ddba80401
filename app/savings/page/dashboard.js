"use strict";
// The savings page: fetches ./savings (with the proxy key, when the proxy asks for one) and draws it. Every figure
// goes in with textContent, never as markup: model names are the clients'.
(function () {
  const KEY = "compaction-proxy-key";
  const REFRESH_MS = 15000;
  const SVG = "http://www.w3.org/2000/svg";
  const LINES = [
    ["tokens_before", "prompt tokens before compaction"],
    ["tokens_after", "after compaction"],
    ["estimate_without_proxy", "billed input without the proxy (estimate)"],
    ["billed_input", "billed input"],
  ];
  const $ = (selector) => document.querySelector(selector);
  const number = (value) => Number(value).toLocaleString("en-US");
  let timer = null;

  function state(name, message) {
    document.body.dataset.state = name;
    $("#status").textContent = message;
  }

  function lookup(data, path) {
    return path.split(".").reduce((value, part) => (value == null ? undefined : value[part]), data);
  }

  function cell(row, text, className) {
    const td = document.createElement("td");
    td.textContent = text;
    if (className) td.className = className;
    row.appendChild(td);
    return td;
  }

  function fill(table, rows) {
    const body = $(table + " tbody");
    body.replaceChildren();
    for (const values of rows) {
      const tr = document.createElement("tr");
      values.forEach((value, i) => cell(tr, typeof value === "number" ? number(value) : value, i === 1 ? "model" : ""));
      body.appendChild(tr);
    }
    if (!rows.length) {
      const tr = document.createElement("tr");
      cell(tr, "none yet").colSpan = $(table + " thead tr").children.length;
      body.appendChild(tr);
    }
  }

  function sum(object) {
    return Object.values(object).reduce((a, b) => a + b, 0);
  }

  function chart(data) {
    const box = $("#chart");
    const width = 1180, height = 280, left = 70, right = 16, top = 12, bottom = 28;
    const svg = document.createElementNS(SVG, "svg");
    svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
    const add = (name, attributes, text) => {
      const element = document.createElementNS(SVG, name);
      for (const [k, v] of Object.entries(attributes)) element.setAttribute(k, v);
      if (text !== undefined) element.textContent = text;
      svg.appendChild(element);
      return element;
    };
    const points = data.series;
    const step = data.bucket_seconds;
    const end = points.length ? points[points.length - 1].t + step : Date.now() / 1000;
    const start = points.length ? points[0].t : end - step;
    // Cumulative over the history kept: the lines only rise, so idle minutes stay flat and the gap between
    // before and after is what compaction saved so far.
    const totals = Object.fromEntries(LINES.map(([name]) => [name, [[start, 0]]]));
    for (const point of points) {
      for (const [name] of LINES) {
        const line = totals[name];
        line.push([point.t + step, line[line.length - 1][1] + point[name]]);
      }
    }
    const top_value = Math.max(1, ...LINES.map(([name]) => totals[name][totals[name].length - 1][1]));
    const x = (t) => left + ((t - start) / Math.max(step, end - start)) * (width - left - right);
    const y = (v) => top + (1 - v / top_value) * (height - top - bottom);
    for (let i = 0; i <= 4; i++) {
      const v = (top_value * i) / 4;
      add("line", { class: "grid", x1: left, x2: width - right, y1: y(v), y2: y(v) });
      add("text", { x: left - 6, y: y(v) + 4, "text-anchor": "end" }, number(Math.round(v)));
    }
    const clock = (t) => new Date(t * 1000).toLocaleString("en-GB", { hour: "2-digit", minute: "2-digit" });
    add("text", { x: left, y: height - 8 }, clock(start));
    add("text", { x: width - right, y: height - 8, "text-anchor": "end" }, clock(end));
    for (const [name] of LINES) {
      const path = totals[name].map(([t, v], i) => `${i ? "L" : "M"}${x(t).toFixed(1)},${y(v).toFixed(1)}`);
      add("path", { class: name, d: path.join(" "), "data-series": name, "data-last": totals[name].at(-1)[1] });
    }
    box.replaceChildren(svg);
    const legend = $("#legend");
    legend.replaceChildren();
    for (const [name, label] of LINES) {
      const item = document.createElement("span");
      const swatch = document.createElement("i");
      swatch.className = name;
      item.append(swatch, label);
      legend.appendChild(item);
    }
    const hours = data.history_minutes / 60;
    $("#span").textContent = `(cumulative, per minute, over the last ${hours >= 1 ? hours + " h" : data.history_minutes + " min"})`;
  }

  function render(data) {
    const totals = data.totals;
    const derived = {
      billed_saved_percent: totals.estimate_without_proxy
        ? Math.round(1000 * (1 - totals.billed_input / totals.estimate_without_proxy)) / 10
        : 0,
    };
    for (const element of document.querySelectorAll("[data-figure]")) {
      const path = element.dataset.figure;
      const value = path in derived ? derived[path] : lookup(data, path);
      element.dataset.value = value === undefined ? "" : String(value);
      element.textContent = typeof value === "number" ? number(value) + (element.dataset.unit || "") : String(value);
    }
    fill("#rows", data.rows.map((r) => [
      r.wire, r.model || "(none)", r.requests, r.tokens_before, r.tokens_after, r.saved_percent + "%",
      r.input.uncached, r.input.cache_read, r.input.cache_write, r.billed_input, r.estimate_without_proxy,
      r.expand.rounds.answered, r.expand.calls.repeated, sum(r.fallbacks),
    ]));
    fill("#fallbacks", Object.entries(totals.fallbacks));
    fill("#windows", data.windows.map((w) => [w.wire, w.model, w.context_window]));
    chart(data);
    $("#figures").hidden = false;
    $("#unlock").hidden = true;
    state("ready", `Updated ${new Date().toLocaleTimeString("en-GB")}; kept in ${data.store}.`);
  }

  async function load() {
    clearTimeout(timer);
    const key = sessionStorage.getItem(KEY);
    const headers = key ? { Authorization: "Bearer " + key } : {};
    let response;
    try {
      response = await fetch("savings", { headers, cache: "no-store", credentials: "omit" });
    } catch (error) {
      state("error", "The proxy did not answer; trying again.");
      timer = setTimeout(load, REFRESH_MS);
      return;
    }
    if (response.status === 401) {
      if (key) sessionStorage.removeItem(KEY);
      $("#figures").hidden = true;
      $("#unlock").hidden = false;
      state("locked", key ? "That key was refused." : "A proxy key is needed.");
      return;
    }
    if (!response.ok) {
      state("error", `The proxy answered ${response.status}; trying again.`);
      timer = setTimeout(load, REFRESH_MS);
      return;
    }
    render(await response.json());
    timer = setTimeout(load, REFRESH_MS);
  }

  $("#unlock").addEventListener("submit", (event) => {
    event.preventDefault();
    sessionStorage.setItem(KEY, $("#key").value.trim());
    $("#key").value = "";
    load();
  });
  load();
})();
