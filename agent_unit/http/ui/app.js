// agent-unit inbox: the runs, a run's live events, and a form for its interrupt's answer.
// Plain browser JavaScript with no dependency and no build step; it talks to the API beside it
// (relative URLs, so it works under any base_path or mount) or where the page's meta says.
// Every value from the server is put in the page as text (textContent), never as HTML.
"use strict";

// Where the API is: "../" beside it, or the path create_inbox() was given.
const API = new URL(document.querySelector('meta[name="agent-unit-api"]').content, location.href.split("#")[0]);
const LIVE = ["queued", "running", "interrupted", "sleeping"];
const LIST_REFRESH_MS = 3000; // the list's live refresh: two indexed queries of the first page
const KEEP = 2000; // events a tab keeps per run (sessionStorage), enough for a long run's timeline
const STATUSES = [...LIVE, "completed", "failed", "cancelled"];
const main = document.getElementById("main");
const statusLine = document.getElementById("status");
let source = null; // the open EventSource of the run page

// -- helpers ---------------------------------------------------------------------------------

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else if (key === "style") for (const [name, v] of Object.entries(value)) el.style.setProperty(name, v); // CSSOM: allowed by the CSP
    else if (key === "class") el.className = value;
    else el.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children.flat(Infinity)) {
    if (child !== undefined && child !== null && child !== false) el.append(child);
  }
  return el;
}

function say(message) {
  statusLine.textContent = message;
}

async function api(path, options = {}) {
  const response = await fetch(new URL(path, API), { headers: { accept: "application/json" }, ...options });
  const body = response.status === 204 ? null : await response.json().catch(() => null);
  if (!response.ok) {
    const error = new Error((body && body.error && body.error.message) || `HTTP ${response.status}`);
    error.status = response.status;
    error.details = body && body.error && body.error.details;
    throw error;
  }
  return body;
}

function json(value) {
  return JSON.stringify(value, null, 2);
}

function when(iso) {
  return iso ? new Date(iso).toLocaleString() : "";
}

function show(title, ...content) {
  if (source) source.close();
  source = null;
  const heading = h("h1", { tabindex: "-1" }, title);
  main.replaceChildren(heading, ...content);
  document.title = `${title} · agent-unit`;
  heading.focus(); // a screen reader hears the new page; the keyboard starts from its top
}

// -- the runs --------------------------------------------------------------------------------

async function listPage(query) {
  const filters = {
    status: query.get("status") || "",
    agent: query.get("agent") || "",
    thread_id: query.get("thread_id") || "",
  };
  let agents = [];
  try {
    agents = (await api("agents")).agents.map((agent) => agent.name);
  } catch (error) {
    say(error.message);
  }
  const select = (name, label, values, any) =>
    h("label", {}, label,
      h("select", { name },
        h("option", { value: "" }, any),
        values.map((value) => h("option", { value, selected: value === filters[name] }, value))));
  const form = h("form", { class: "filters", "aria-label": "Filter runs", onsubmit: (event) => {
    event.preventDefault();
    const params = new URLSearchParams();
    for (const [key, value] of new FormData(form)) if (value) params.set(key, value);
    location.hash = `#/?${params}`;
  } },
    select("status", "Status", STATUSES, "any"),
    select("agent", "Agent", agents, "any"),
    h("label", {}, "Thread", h("input", { name: "thread_id", value: filters.thread_id, autocomplete: "off" })),
    h("button", { type: "submit" }, "Filter"));
  const idInput = h("input", { name: "run_id", autocomplete: "off", spellcheck: "false" });
  const search = h("form", { class: "search", role: "search", "aria-label": "Find a run", onsubmit: async (event) => {
    event.preventDefault();
    const id = idInput.value.trim();
    if (!id) return;
    try {
      await api(`runs/${encodeURIComponent(id)}`);
      location.hash = `#/runs/${encodeURIComponent(id)}`;
    } catch (error) {
      say(error.status === 404 ? `No run has the id ${id}.` : `Could not look up run ${id}: ${error.message}`);
      idInput.focus();
    }
  } },
    h("label", {}, "Run id", idInput),
    h("button", { type: "submit" }, "Find"));
  const list = h("ul", { class: "runs", "aria-label": "Runs" });
  const more = h("div");
  show("Runs", search, form, list, more);

  const params = new URLSearchParams();
  if (filters.agent) params.set("agent", filters.agent);
  if (filters.thread_id) params.set("thread_id", filters.thread_id);
  const status = filters.status ? `&status=${encodeURIComponent(filters.status)}` : "";
  const items = new Map(); // run id -> its list item, updated in place by the live refresh
  const shown = new Map(); // run id -> the run as last shown
  const tally = () => {
    const waiting = [...shown.values()].filter((run) => run.status === "interrupted").length;
    return shown.size ? `${shown.size} run(s), ${waiting} waiting for an answer` : "No runs match.";
  };
  // The first page: the interrupted ones first (they wait for someone), then the newest.
  const firstPage = async () => {
    if (!filters.status) {
      const [waiting, all] = await Promise.all([api(`runs?${params}&status=interrupted&limit=200`), api(`runs?${params}`)]);
      const ids = new Set(waiting.runs.map((run) => run.id));
      return { runs: [...waiting.runs, ...all.runs.filter((run) => !ids.has(run.id))], cursor: all.next_cursor };
    }
    const page = await api(`runs?${params}${status}`);
    return { runs: page.runs, cursor: page.next_cursor };
  };
  try {
    const { runs, cursor } = await firstPage();
    for (const run of runs) {
      const item = runItem(run);
      items.set(run.id, item);
      shown.set(run.id, run);
      list.append(item);
    }
    say(tally());
    const moreButton = (next) =>
      h("button", { type: "button", onclick: async (event) => {
        try {
          const page = await api(`runs?${params}${status}&cursor=${encodeURIComponent(next)}`);
          const fresh = page.runs.filter((run) => !items.has(run.id));
          const added = fresh.map((run) => {
            const item = runItem(run);
            items.set(run.id, item);
            shown.set(run.id, run);
            return item;
          });
          list.append(...added);
          event.target.replaceWith(page.next_cursor ? moreButton(page.next_cursor) : "");
          if (added.length) added[0].querySelector("a").focus(); // the button is gone: keep the place
          say(`${fresh.length} more run(s)`);
        } catch (error) {
          say(`Could not list more runs: ${error.message}`);
        }
      } }, "More runs");
    if (cursor) more.append(moreButton(cursor));
  } catch (error) {
    say(`Could not list the runs: ${error.message}`);
    return;
  }

  // Live: every few seconds while the list shows and the tab is visible, the first page again
  // (two indexed queries): new runs come in at the top, changed ones are updated where they are.
  const refresh = async () => {
    if (!list.isConnected) return;
    if (document.visibilityState === "visible") {
      try {
        const { runs } = await firstPage();
        if (!list.isConnected) return;
        const added = [];
        let changed = false;
        for (const run of runs) {
          const before = shown.get(run.id);
          shown.set(run.id, run);
          if (!before) {
            const item = runItem(run);
            items.set(run.id, item);
            added.push([run, item]);
          } else if (before.version !== run.version) {
            updateItem(items.get(run.id), run);
            changed = true;
          }
        }
        // New ones: the interrupted above everything, the others above the older ones.
        const firstOther = [...list.children].find((li) => !li.classList.contains("interrupted"));
        for (const [run, item] of added.reverse()) {
          if (run.status === "interrupted" || filters.status) list.prepend(item);
          else list.insertBefore(item, firstOther || null); // after the interrupted ones
        }
        if (added.length) say(`${added.length} new run(s); ${tally()}`);
        else if (changed) say(tally());
      } catch {
        // the next refresh tries again; the list stays as it is meanwhile
      }
    }
    setTimeout(refresh, LIST_REFRESH_MS);
  };
  setTimeout(refresh, LIST_REFRESH_MS);
}

// A run's item, changed in place: the focus and the reader's place stay where they are.
function updateItem(item, run) {
  if (!item) return;
  item.className = run.status;
  item.querySelector("a").textContent = run.interrupt ? `${run.agent}: ${run.interrupt.name}` : run.agent;
  const badge = item.querySelector(".badge");
  badge.className = `badge ${run.status}`;
  badge.textContent = run.status;
}

function runItem(run) {
  return h("li", { class: run.status },
    h("a", { href: `#/runs/${encodeURIComponent(run.id)}` },
      run.interrupt ? `${run.agent}: ${run.interrupt.name}` : run.agent),
    h("span", { class: "meta" },
      h("span", { class: `badge ${run.status}` }, run.status), " ",
      `${run.id} · thread ${run.thread_id} · ${when(run.created_at)}`));
}

// -- one run ---------------------------------------------------------------------------------

async function runPage(id) {
  let run;
  try {
    run = await api(`runs/${encodeURIComponent(id)}`);
  } catch (error) {
    show("Run not found", h("p", {}, error.message), h("p", {}, h("a", { href: "#/" }, "Back to the runs")));
    return;
  }
  const facts = h("section", { "aria-labelledby": "facts" });
  const answer = h("section", { "aria-labelledby": "answer-title" });
  const events = h("ol", { class: "events", "aria-label": "Events" });
  const live = h("p", { class: "live" });
  const timeline = h("div", { class: "tl-box" });
  show(`Run ${run.id}`, facts, answer,
    h("section", { "aria-labelledby": "timeline-title" }, h("h2", { id: "timeline-title" }, "Timeline"), timeline),
    h("section", { "aria-labelledby": "events-title" }, h("h2", { id: "events-title" }, "Events"), live, events));
  const view = Timeline.view(h);
  timeline.append(view.el);
  let drawn = false;
  const draw = () => {
    if (drawn) return;
    drawn = true;
    requestAnimationFrame(() => {
      drawn = false;
      if (timeline.isConnected) view.update(Timeline.build(kept), Date.now());
    });
  };

  const key = `agent-unit:events:${run.id}`;
  const stored = JSON.parse(sessionStorage.getItem(key) || "[]");
  const kept = stored.slice(-KEEP);
  kept.forEach((event) => events.append(eventItem(event)));
  draw();
  let after = kept.length ? kept[kept.length - 1].seq : 0;

  let asked = null; // the interrupt the form is for: a refresh keeps what the user typed
  const render = (record) => {
    run = record;
    renderFacts(facts, record);
    const waiting = record.status === "interrupted" && record.interrupt ? record.interrupt.key : null;
    if (waiting !== asked) renderAnswer(answer, record, refresh);
    asked = waiting;
  };
  const refresh = async () => {
    try {
      const record = await api(`runs/${encodeURIComponent(run.id)}`);
      if (record.version === run.version) return;
      if (record.status !== run.status) say(`Run ${record.status}`);
      render(record);
    } catch (error) {
      say(error.message);
    }
  };
  render(run);
  say(`Run ${run.status}`);

  // Live events: EventSource resends the last seq as Last-Event-ID when it reconnects; after a
  // reload, ?after= continues from the last seq this tab saw (kept in sessionStorage). If the
  // browser gives up (the server was down too long), a new source continues from there too.
  const receive = (seq, text) => {
    if (seq <= after) return;
    after = seq;
    let data;
    try {
      data = JSON.parse(text);
    } catch {
      data = { type: "?" };
    }
    const event = { seq, data };
    kept.push(event);
    if (kept.length > KEEP) kept.shift();
    try {
      sessionStorage.setItem(key, JSON.stringify(kept));
    } catch {
      // storage full or disabled: the page still works, a reload just starts after nothing
    }
    events.append(eventItem(event));
    draw();
    return data;
  };
  const connect = () => {
    const opened = new EventSource(new URL(`runs/${encodeURIComponent(run.id)}/events?follow=1&after=${after}`, API));
    source = opened;
    opened.onopen = () => { live.textContent = "Live."; };
    opened.onerror = () => {
      if (source !== opened) return;
      live.textContent = "Reconnecting…";
      if (opened.readyState === EventSource.CLOSED) setTimeout(() => { if (source === opened) connect(); }, 3000);
    };
    opened.onmessage = (message) => {
      const data = receive(Number(message.lastEventId), message.data);
      if (!data || !/^RUN_/.test(data.type)) return;
      if (["RUN_FINISHED", "RUN_ERROR", "RUN_CANCELLED"].includes(data.type)) {
        opened.close(); // the last event a run has
        if (source === opened) source = null;
        live.textContent = "The run has ended.";
      }
      refresh();
    };
  };
  if (LIVE.includes(run.status)) {
    connect();
    // Running bars and waits grow while nothing arrives: redraw each second while the page shows this run.
    const tick = setInterval(() => (timeline.isConnected ? draw() : clearInterval(tick)), 1000);
    return;
  }
  // An ended run: its remaining events once (a stream without follow ends by itself).
  try {
    const response = await fetch(new URL(`runs/${encodeURIComponent(run.id)}/events?after=${after}`, API));
    for (const block of (await response.text()).split("\n\n")) {
      const id = block.match(/^id: (\d+)$/m);
      const data = block.match(/^data: (.*)$/m);
      if (id && data) receive(Number(id[1]), data[1]);
    }
    live.textContent = "The run has ended.";
  } catch (error) {
    say(error.message);
  }
}

function eventItem({ seq, data }) {
  const detail =
    data.stepName || data.toolCallName || data.delta || data.name || data.message ||
    (data.interrupt && data.interrupt.name) || (data.result !== undefined ? json(data.result) : "");
  return h("li", {}, h("code", {}, String(seq)), h("strong", {}, data.type), detail ? ` ${detail}` : "");
}

function renderFacts(section, run) {
  const rows = [
    ["Agent", run.agent],
    ["Status", h("span", { class: `badge ${run.status}` }, run.status)],
    ["Thread", h("a", { href: `#/?thread_id=${encodeURIComponent(run.thread_id)}` }, run.thread_id)],
    ["Started", when(run.created_at)],
    ["Updated", when(run.updated_at)],
  ];
  if (run.wake_at) rows.push(["Wakes", when(run.wake_at)]);
  if (run.interrupt && run.interrupt.expires_at) rows.push(["Answer by", when(run.interrupt.expires_at)]);
  if (run.settling && run.settling.length) rows.push(["Still running", `step ${run.settling.join(", ")} (cancelled; settling)`]);
  if (run.retry) rows.push(["Retried", `${run.retry.count} time${run.retry.count === 1 ? "" : "s"}, last ${new Date(run.retry.at).toLocaleString()}`]);
  for (const answer of run.answers || []) {
    rows.push([`Answered ${answer.interrupt}`, answer.expired
      ? h("span", { class: "answered" }, `nobody (expired ${new Date(answer.at).toLocaleString()})`)
      : h("span", { class: "answered" }, `${answer.by ?? "anonymous"}, ${new Date(answer.at).toLocaleString()}`)]);
  }
  const buttons = h("div", { class: "actions" });
  if (run.status === "failed") {
    buttons.append(h("button", { type: "button", onclick: () => act(run, "retry") }, "Retry from the failed step"));
  }
  if (LIVE.includes(run.status)) {
    buttons.append(h("button", { type: "button", class: "danger", onclick: () => act(run, "cancel") }, "Cancel run"));
  } else {
    buttons.append(h("button", { type: "button", class: "danger", onclick: () => act(run, "delete") }, "Delete run"));
  }
  section.replaceChildren(...[
    h("h2", { id: "facts" }, "Summary"),
    h("dl", { class: "facts" }, rows.map(([term, value]) => [h("dt", {}, term), h("dd", {}, value)])),
    h("details", {}, h("summary", {}, "Input"), h("pre", {}, json(run.input))),
    run.output !== null && run.output !== undefined ? [h("h2", {}, "Output"), outputView(run.output)] : [],
    run.error ? [h("h2", {}, "Error"), errorView(run.error)] : [],
    buttons,
  ].flat()); // replaceChildren takes nodes, not arrays: an array would be shown as its text
}

// The output: text as text; JSON as a tree whose objects and arrays fold (details), and its raw text.
function outputView(value) {
  if (typeof value === "string") return h("pre", { class: "output" }, value);
  if (value === null || typeof value !== "object") return h("pre", { class: "output" }, json(value));
  return h("div", { class: "output" },
    h("div", { class: "json-tree" }, jsonTree(value, null)),
    h("details", {}, h("summary", {}, "As JSON text"), h("pre", { class: "raw" }, json(value))));
}

function jsonTree(value, key) {
  const name = key === null ? [] : [h("span", { class: "key" }, `${key}: `)];
  if (value === null || typeof value !== "object") {
    return h("div", { class: "leaf" }, name, h("span", { class: `v ${value === null ? "null" : typeof value}` }, JSON.stringify(value)));
  }
  const entries = Array.isArray(value) ? value.map((v, i) => [i, v]) : Object.entries(value);
  const size = Array.isArray(value) ? `[${entries.length}]` : `{${entries.length}}`;
  return h("details", { open: true }, h("summary", {}, name, size),
    h("div", { class: "children" }, entries.map(([k, v]) => jsonTree(v, k))));
}

// A failed run's error: its type and message, the step, and the user's own frames (innermost last).
function errorView(error) {
  const frames = error.frames || [];
  return h("div", { class: "run-error", role: "alert" },
    h("p", {}, h("strong", {}, error.type), `: ${error.message}`, error.step ? ` (in step ${error.step})` : ""),
    frames.length ? h("ol", { class: "frames", "aria-label": "Where it was raised" }, frames.map((frame) =>
      h("li", {}, h("code", {}, `${frame.file}:${frame.line ?? "?"}`), ` in ${frame.function}`,
        frame.code ? h("pre", {}, frame.code) : []))) : []);
}

async function act(run, action) {
  const questions = {
    cancel: `Cancel run ${run.id}?`,
    retry: `Retry run ${run.id} from the step that failed, with the code deployed now?`,
    delete: `Delete run ${run.id} and its history?`,
  };
  if (!confirm(questions[action])) return;
  try {
    if (action === "retry") {
      await api(`runs/${encodeURIComponent(run.id)}/retry`, { method: "POST" });
      say("Run retried");
      route();
    } else if (action === "cancel") {
      await api(`runs/${encodeURIComponent(run.id)}/cancel`, { method: "POST" });
      say("Run cancelled");
      route();
    } else {
      await api(`runs/${encodeURIComponent(run.id)}`, { method: "DELETE" });
      sessionStorage.removeItem(`agent-unit:events:${run.id}`);
      location.hash = "#/";
      say(`Run ${run.id} deleted`);
    }
  } catch (error) {
    say(error.message);
  }
}

// -- the answer form -------------------------------------------------------------------------

function renderAnswer(section, run, refresh) {
  if (run.status !== "interrupted" || !run.interrupt) {
    section.replaceChildren();
    return;
  }
  const interrupt = run.interrupt;
  const formError = h("p", { class: "error", id: "answer-error", role: "alert" });
  const submit = async (value, fields) => {
    formError.textContent = "";
    for (const field of fields) field.setError("");
    try {
      await api(`runs/${encodeURIComponent(run.id)}/resume`, {
        method: "POST",
        headers: { "content-type": "application/json", accept: "application/json" },
        body: JSON.stringify({ answer: value }),
      });
      say("Answer sent: the run continues");
      main.querySelector("h1").focus();
      refresh();
    } catch (error) {
      if (error.status === 409) refresh();
      // The server's own message beside the field it names, and for the whole form.
      let first = null;
      for (const detail of error.details || []) {
        const field = fields.find((f) => f.path === (detail.loc || []).join("."));
        if (field) {
          field.setError(detail.msg);
          first = first || field;
        }
      }
      formError.textContent = error.message;
      say(`The answer was refused: ${error.message}`);
      (first ? first.input : formError).focus();
    }
  };

  let form;
  if (interrupt.name === "tool-approval") {
    const payload = interrupt.payload || {};
    const reason = textField("reason", "Reason (optional)", { type: "string" }, false);
    const fields = reason.fields;
    form = h("form", { novalidate: true, onsubmit: (event) => event.preventDefault() },
      h("p", {}, "Call ", h("strong", {}, String(payload.tool)), " with:"),
      h("pre", {}, json(payload.arguments)),
      reason.el,
      formError,
      h("div", { class: "actions" },
        h("button", { type: "button", class: "primary", onclick: () =>
          submit(withReason({ approved: true }, reason.get()), fields) }, "Approve"),
        h("button", { type: "button", onclick: () =>
          submit(withReason({ approved: false }, reason.get()), fields) }, "Decline")));
  } else {
    const schema = interrupt.answer_schema;
    const root = field(schema || {}, schema || {}, "", "Answer", true);
    const fields = root.fields;
    form = h("form", { novalidate: true, onsubmit: (event) => {
      event.preventDefault();
      let value;
      try {
        value = root.get();
      } catch (error) {
        formError.textContent = error.message;
        return;
      }
      submit(value, fields);
    } },
      root.el, formError,
      h("div", { class: "actions" }, h("button", { type: "submit", class: "primary" }, "Send answer")));
  }
  section.replaceChildren(
    h("div", { class: "answer" },
      h("h2", { id: "answer-title" }, `Waiting for: ${interrupt.name}`),
      interrupt.name === "tool-approval" ? [] : [h("h3", {}, "Payload"), h("pre", {}, json(interrupt.payload))],
      form));
}

function withReason(answer, reason) {
  return reason ? { ...answer, reason } : answer;
}

let fieldCount = 0;

// A field for ``schema`` at ``path``: {el, get(), fields}; ``fields`` are the inputs below it,
// each with its ``path`` (as the server's error ``loc`` joined by ".") and ``setError``.
function field(schema, root, path, label, required) {
  schema = resolve(schema, root);
  const options = schema.anyOf || schema.oneOf;
  if (options) {
    const real = options.map((option) => resolve(option, root)).filter((option) => option.type !== "null");
    if (real.length === 1) {
      return field({ ...schema, ...real[0], anyOf: undefined, oneOf: undefined }, root, path, label, false);
    }
  }
  const title = schema.title || label;
  if (schema.type === "object" && schema.properties) {
    const needed = new Set(schema.required || []);
    const children = Object.entries(schema.properties).map(([name, sub]) =>
      field(sub, root, path ? `${path}.${name}` : name, resolve(sub, root).title || name, needed.has(name)));
    const body = children.map((child) => child.el);
    const el = path
      ? h("fieldset", {}, h("legend", {}, title), describe(schema), body)
      : h("div", {}, describe(schema), body);
    return {
      el,
      fields: children.flatMap((child) => child.fields),
      get: () => {
        const value = {};
        for (const [index, name] of Object.keys(schema.properties).entries()) {
          const got = children[index].get();
          if (got !== undefined) value[name] = got;
        }
        return value;
      },
    };
  }
  if (schema.enum || schema.const !== undefined) return choiceField(path, title, schema, required);
  if (schema.type === "boolean") return checkField(path, title, schema);
  if (["string", "number", "integer"].includes(schema.type)) return textField(path, title, schema, required);
  return jsonField(path, title, schema, required);
}

function resolve(schema, root) {
  let seen = 0;
  while (schema && schema.$ref && seen++ < 20) {
    const parts = schema.$ref.replace(/^#\//, "").split("/");
    let target = root;
    for (const part of parts) target = target && target[part.replace(/~1/g, "/").replace(/~0/g, "~")];
    schema = { ...target, ...schema, $ref: undefined };
  }
  return schema || {};
}

function describe(schema) {
  return schema.description ? h("p", { class: "hint" }, schema.description) : [];
}

// One labelled input with its hint and its error, wired with aria-describedby.
function wrap(path, label, schema, input, { check = false } = {}) {
  const id = input.id;
  const hint = schema.description ? h("p", { class: "hint", id: `${id}-hint` }, schema.description) : null;
  const error = h("p", { class: "error", id: `${id}-error` });
  input.setAttribute("aria-describedby", [hint && hint.id, error.id].filter(Boolean).join(" "));
  const labelEl = h("label", { for: id }, label);
  const el = h("div", { class: check ? "field check" : "field" }, check ? [input, labelEl] : [labelEl, input], hint, error);
  return {
    el,
    path,
    input,
    setError: (message) => {
      error.textContent = message;
      if (message) input.setAttribute("aria-invalid", "true");
      else input.removeAttribute("aria-invalid");
    },
  };
}

function nextId() {
  fieldCount += 1;
  return `field-${fieldCount}`;
}

function checkField(path, label, schema) {
  const input = h("input", { type: "checkbox", id: nextId(), name: path, checked: schema.default === true });
  const wrapped = wrap(path, label, schema, input, { check: true });
  return { el: wrapped.el, fields: [wrapped], get: () => input.checked };
}

function choiceField(path, label, schema, required) {
  const values = schema.enum || [schema.const];
  const input = h("select", { id: nextId(), name: path, required },
    required && values.length > 1 && schema.default === undefined ? h("option", { value: "" }, "Choose…") : [],
    !required ? h("option", { value: "" }, "(none)") : [],
    values.map((value, index) =>
      h("option", { value: String(index), selected: value === schema.default }, value === null ? "(none)" : String(value))));
  const wrapped = wrap(path, label, schema, input);
  return {
    el: wrapped.el,
    fields: [wrapped],
    get: () => (input.value === "" ? (required ? null : undefined) : values[Number(input.value)]),
  };
}

function textField(path, label, schema, required) {
  const numeric = schema.type === "number" || schema.type === "integer";
  const long = schema.type === "string" && (schema.maxLength === undefined || schema.maxLength > 200) && /reason|comment|note|message|text|description/i.test(path || label);
  const attrs = {
    id: nextId(),
    name: path,
    required,
    value: schema.default != null ? String(schema.default) : undefined,
  };
  const input = long
    ? h("textarea", { ...attrs, rows: 3, value: undefined }, schema.default != null ? String(schema.default) : "")
    : h("input", {
        ...attrs,
        type: numeric ? "number" : "text",
        inputmode: numeric ? (schema.type === "integer" ? "numeric" : "decimal") : undefined,
        step: numeric ? (schema.type === "integer" ? "1" : "any") : undefined,
        min: schema.minimum,
        max: schema.maximum,
        autocomplete: "off",
      });
  const wrapped = wrap(path, label, schema, input);
  return {
    el: wrapped.el,
    fields: [wrapped],
    get: () => {
      const raw = input.value;
      if (raw === "" && !required) return undefined;
      if (!numeric) return raw;
      return raw === "" ? null : Number(raw);
    },
  };
}

function jsonField(path, label, schema, required) {
  const input = h("textarea", { id: nextId(), name: path, rows: 4, spellcheck: "false" },
    schema.default != null ? json(schema.default) : "");
  const wrapped = wrap(path, `${label} (JSON)`, schema, input);
  return {
    el: wrapped.el,
    fields: [wrapped],
    get: () => {
      if (input.value.trim() === "") return required ? null : undefined;
      try {
        return JSON.parse(input.value);
      } catch {
        wrapped.setError("This is not valid JSON.");
        input.focus();
        throw new Error(`${label}: not valid JSON`);
      }
    },
  };
}

// -- routing ---------------------------------------------------------------------------------

function route() {
  const hash = location.hash.replace(/^#/, "") || "/";
  const [path, query] = hash.split("?");
  const match = path.match(/^\/runs\/([^/]+)$/);
  if (match) runPage(decodeURIComponent(match[1]));
  else listPage(new URLSearchParams(query || ""));
}

window.addEventListener("hashchange", route);
route();
