// agent-unit inbox: a run's timeline, built from its stored events alone (spec/events.md,
// "A timeline from the events"). Plain browser JavaScript, loaded before app.js, which calls
// Timeline.build(events) and Timeline.view(h).update(model, now).
"use strict";

const Timeline = (() => {
  const WAIT_SHARE = 12; // percent of the track a wait takes, however long: a two-day sleep leaves room for the steps

  function duration(ms) {
    if (ms === null || ms === undefined || !Number.isFinite(ms)) return "";
    if (ms < 1000) return `${Math.max(0, Math.round(ms))} ms`;
    const s = ms / 1000;
    if (s < 60) return `${s < 10 ? s.toFixed(1) : Math.round(s)} s`;
    const units = [["day", 86400], ["h", 3600], ["min", 60], ["s", 1]];
    const parts = [];
    let left = Math.round(s);
    for (const [unit, size] of units) {
      const count = Math.floor(left / size);
      if (count) parts.push(unit === "day" ? `${count} day${count > 1 ? "s" : ""}` : `${count} ${unit}`);
      left -= count * size;
      if (parts.length === 2) break;
    }
    return parts.join(" ");
  }

  // events: [{seq, data}] in seq order -> {items, waits, start, end, open}
  function build(events) {
    const items = []; // top-level rows: steps, model and tool calls outside a step, waits, markers
    const waits = [];
    let step = null; // the step running now (model and tool calls go under it)
    const models = new Map();
    const tools = new Map();
    let message = null; // the model call a streamed text belongs to
    let attempt = 1;
    let wait = null;
    let start = null;
    let end = null;
    let yielded = null;
    const add = (item) => (step && item.kind !== "step" ? step.children.push(item) : items.push(item));
    const cut = (at) => {
      // A crash cut the segment short: whatever was running has no end event.
      for (const item of [step, ...models.values(), ...tools.values()]) {
        if (item && item.end === null) {
          item.end = at;
          item.error = { type: "Crash", message: "the process stopped here; the work ran again on recovery" };
          item.status = "cut";
          const current = item.attempts && item.attempts[item.attempts.length - 1];
          if (current && current.end === null) {
            current.end = at;
            current.error = item.error;
          }
        }
      }
      step = null;
      models.clear();
      tools.clear();
    };
    for (const { seq, data } of events) {
      const at = data.timestamp || (end === null ? Date.now() : end);
      const before = end === null ? at : end; // the last moment the previous events saw
      if (start === null) start = at;
      end = Math.max(end || at, at);
      if (yielded && data.type !== "CUSTOM") {
        yielded.end = at; // the continuation's first event
        yielded = null;
      }
      switch (data.type) {
        case "RUN_STARTED": {
          const next = ((data.metadata || {})["agent-unit"] || {}).attempt || 1;
          const waited = wait !== null;
          if (wait) {
            wait.end = at; // answered, or woken
            wait = null;
          }
          if (next > attempt) {
            cut(before); // what was running then has no end: the crash came after the last event
            items.push({ kind: "recovery", name: `Recovered after a crash (attempt ${next})`, start: at, end: at, seq, children: [] });
          } else if (!waited && items.length) {
            items.push({ kind: "resume", name: "Continued", start: at, end: at, seq, children: [] });
          }
          attempt = Math.max(attempt, next);
          break;
        }
        case "STEP_STARTED":
          step = { kind: "step", name: data.stepName, start: at, end: null, seq, attempts: [{ start: at, end: null }], children: [], status: "running" };
          items.push(step);
          break;
        case "CUSTOM": {
          const value = data.value || {};
          if (data.name === "agent-unit.step-retry" && step && step.name === value.stepName) {
            const current = step.attempts[step.attempts.length - 1];
            current.end = at;
            current.error = value.error;
            step.attempts.push({ start: at + 1000 * (value.retryInSeconds || 0), end: null });
          } else if (data.name === "agent-unit.model-started") {
            const call = { kind: "model", name: value.name || "model", start: at, end: null, seq, text: "", children: [], status: "running" };
            models.set(value.callId, call);
            message = call;
            add(call);
          } else if (data.name === "agent-unit.model-finished") {
            const call = models.get(value.callId);
            if (call) {
              call.end = at;
              call.usage = value.usage;
              call.error = value.error;
              call.status = value.error ? "failed" : "done";
              models.delete(value.callId);
            }
            message = null;
          } else if (data.name === "agent-unit.yield") {
            yielded = { kind: "yield", name: "Yielded: continued in a fresh invocation", start: at, end: at, seq, children: [] };
            items.push(yielded);
          } else if (data.name !== "agent-unit.released") {
            add({ kind: "emit", name: data.name, start: at, end: at, seq, output: data.value, children: [] });
          }
          break;
        }
        case "STEP_FINISHED": {
          if (!step) break;
          const failed = ((data.metadata || {})["agent-unit"] || {}).status === "failed";
          step.end = at;
          const current = step.attempts[step.attempts.length - 1];
          current.end = at;
          if (failed) {
            step.error = data.metadata["agent-unit"].error;
            current.error = step.error;
          }
          step.status = failed ? "failed" : "done";
          step = null;
          break;
        }
        case "TOOL_CALL_START": {
          const call = { kind: "tool", name: data.toolCallName, start: at, end: null, seq, args: "", children: [], status: "running" };
          tools.set(data.toolCallId, call);
          add(call);
          break;
        }
        case "TOOL_CALL_ARGS": {
          const call = tools.get(data.toolCallId);
          if (call) call.args += data.delta || "";
          break;
        }
        case "TOOL_CALL_RESULT": {
          const call = tools.get(data.toolCallId);
          if (call) {
            call.end = at;
            call.output = data.content;
            call.status = "done";
            tools.delete(data.toolCallId);
          }
          break;
        }
        case "TEXT_MESSAGE_CONTENT":
          if (message) message.text += data.delta || "";
          break;
        case "RUN_SLEEPING":
          wait = { kind: "sleep", name: "Sleeps", start: at, end: null, until: Date.parse(data.wakeAt), seq, children: [] };
          items.push(wait);
          waits.push(wait);
          break;
        case "RUN_INTERRUPTED":
          wait = { kind: "interrupt", name: `Waits for an answer: ${(data.interrupt || {}).name}`, start: at, end: null, seq, input: (data.interrupt || {}).payload, children: [] };
          items.push(wait);
          waits.push(wait);
          break;
        case "RUN_FINISHED":
          items.push({ kind: "finished", name: "Finished", start: at, end: at, seq, output: data.result, usage: data.usage, children: [] });
          break;
        case "RUN_ERROR":
          items.push({ kind: "failed", name: "Failed", start: at, end: at, seq, error: { type: data.code, message: data.message }, children: [] });
          break;
        case "RUN_CANCELLED":
          if (wait) {
            wait.end = at;
            wait = null;
          }
          items.push({ kind: "cancelled", name: "Cancelled", start: at, end: at, seq, children: [] });
          break;
        default:
          break;
      }
    }
    const last = items[items.length - 1];
    const ended = Boolean(last && ["finished", "failed", "cancelled"].includes(last.kind));
    return { items, waits, start, end, ended };
  }

  // A map from time to a percent of the track: active time is linear, each wait a fixed share.
  function scale(model, now) {
    const start = model.start;
    const end = model.ended ? model.end : Math.max(model.end || start, now || 0); // a live run's track grows
    const waits = model.waits.map((w) => [w.start, w.end === null ? end : w.end]).filter(([a, b]) => b > a);
    const waited = waits.reduce((sum, [a, b]) => sum + (b - a), 0);
    const active = Math.max(end - start - waited, 1);
    const share = Math.min(WAIT_SHARE, 60 / Math.max(waits.length, 1));
    const k = (100 - share * waits.length) / active;
    return (t) => {
      let pos = 0;
      let cursor = start;
      for (const [a, b] of waits) {
        if (t <= a) return pos + (t - cursor) * k;
        pos += (a - cursor) * k;
        if (t <= b) return pos + (share * (t - a)) / (b - a);
        pos += share;
        cursor = b;
      }
      return Math.min(100, pos + (t - cursor) * k);
    };
  }

  function label(item, now) {
    const end = item.end === null ? now : item.end;
    const took = duration(end - item.start);
    switch (item.kind) {
      case "step": {
        const tries = item.attempts.length > 1 ? `, ${item.attempts.length} attempts` : "";
        const state = item.status === "running" ? "running, " : item.status === "failed" ? "failed, " : item.status === "cut" ? "cut short, " : "";
        return `${state}${took}${tries}`;
      }
      case "model": {
        const u = item.usage;
        const tokens = u ? `, ${u.inputTokens ?? "?"} in / ${u.outputTokens ?? "?"} out tokens` : "";
        return `${item.status === "running" ? "running, " : ""}${took}${tokens}`;
      }
      case "tool":
        return `${item.status === "running" ? "running, " : ""}${took}`;
      case "sleep":
        return item.end === null ? `until ${new Date(item.until).toLocaleString()} (${duration(item.until - item.start)})` : `slept ${took}`;
      case "interrupt":
        return item.end === null ? `for ${took} so far` : `answered after ${took}`;
      default:
        return new Date(item.start).toLocaleTimeString();
    }
  }

  function detail(item, h) {
    const pre = (title, value) =>
      value === undefined || value === null || value === "" ? [] : [h("h4", {}, title), h("pre", {}, typeof value === "string" ? value : JSON.stringify(value, null, 2))];
    const errors = item.kind === "step"
      ? item.attempts.map((a, i) => (a.error ? pre(`Attempt ${i + 1} ${a.error.type === "Crash" ? "cut short" : "failed"} after ${duration(a.end - a.start)}`, `${a.error.type}: ${a.error.message}`) : []))
      : item.error ? pre("Error", `${item.error.type}: ${item.error.message}`) : [];
    const input = item.kind === "tool" ? parsed(item.args) : item.input;
    const output = item.kind === "model" ? item.text : item.output;
    return [
      h("p", { class: "meta" }, `Started ${new Date(item.start).toLocaleString()}`, item.end !== null && item.end !== item.start ? ` · ended ${new Date(item.end).toLocaleString()}` : "", ` · event ${item.seq}`),
      pre("Input", input),
      pre("Output", output),
      item.usage ? pre("Token usage", item.usage) : [],
      errors,
      item.kind === "step" && !errors.flat().length && item.status === "done" ? h("p", { class: "hint" }, "The step's result is in its journal, not in its events.") : [],
    ];
  }

  function parsed(text) {
    try {
      return JSON.parse(text);
    } catch {
      return text;
    }
  }

  let rowCount = 0;

  // The timeline's element and ``update(model, now)``, which changes the rows in place (keyed by
  // the event that opened each item): a live redraw never moves the focus, the details a reader
  // opened, or a button under the pointer.
  function view(h) {
    const list = h("ol", { class: "timeline", "aria-label": "Timeline" });
    const empty = h("p", { class: "hint" }, "No events yet.");
    const el = h("div", {}, empty, list);
    const rows = new Map();
    const opened = new Set();

    const showDetail = (r) => {
      const signature = JSON.stringify([r.item.end, r.item.status, (r.item.attempts || []).length, (r.item.text || "").length]);
      if (signature === r.signature) return;
      r.signature = signature;
      r.panel.replaceChildren(...detail(r.item, h).flat(Infinity));
    };
    const create = (key) => {
      rowCount += 1;
      const panel = h("div", { class: "tl-detail", id: `tl-${rowCount}`, hidden: true });
      const kind = h("span", { class: "kind" });
      const name = h("span", {});
      const r = { key, panel, kind, name, item: null, signature: null };
      r.button = h("button", {
        type: "button",
        class: "tl-name",
        "aria-expanded": "false",
        "aria-controls": panel.id,
        onclick: () => {
          const show = !opened.has(key);
          if (show) opened.add(key);
          else opened.delete(key);
          r.button.setAttribute("aria-expanded", String(show));
          panel.hidden = !show;
          r.signature = null;
          if (show) showDetail(r);
        },
      }, kind, " ", name);
      r.time = h("span", { class: "tl-time" });
      r.track = h("div", { class: "track", "aria-hidden": "true" });
      r.li = h("li", {}, h("div", { class: "tl-head" }, r.button, r.time), r.track, panel);
      return r;
    };

    function update(model, now) {
      empty.hidden = model.start !== null;
      list.hidden = model.start === null;
      if (model.start === null) return;
      const x = scale(model, now);
      const order = [];
      const visit = (item, depth) => {
        order.push([item, depth]);
        for (const child of item.children) visit(child, depth + 1);
      };
      for (const item of model.items) visit(item, 0);
      const seen = new Set();
      let previous = null;
      for (const [item, depth] of order) {
        const key = `${item.kind}:${item.seq}`;
        seen.add(key);
        const r = rows.get(key) || create(key);
        rows.set(key, r);
        r.item = item;
        r.li.className = `tl-row ${item.kind} ${item.status || ""}`;
        r.li.style.setProperty("--depth", String(depth));
        r.kind.className = `kind ${item.kind}`;
        if (r.kind.textContent !== (KINDS[item.kind] || item.kind)) r.kind.textContent = KINDS[item.kind] || item.kind;
        if (r.name.textContent !== item.name) r.name.textContent = item.name;
        const time = label(item, now);
        if (r.time.textContent !== time) r.time.textContent = time;
        const end = item.end === null ? (item.kind === "sleep" ? Math.min(now, item.until) : now) : item.end;
        const spans = item.kind === "step" && item.attempts.length > 1
          ? item.attempts.map((a) => [x(a.start), x(a.end === null ? now : a.end), `tl-bar attempt${a.error ? " failed" : ""}`, 0.4])
          : [[x(item.start), x(end), `tl-bar ${item.kind} ${item.status || ""}`, item.end === item.start ? 0 : 0.4]];
        while (r.track.children.length > spans.length) r.track.lastChild.remove();
        while (r.track.children.length < spans.length) r.track.append(h("span", {}));
        spans.forEach(([left, right, cls, least], i) => {
          const bar = r.track.children[i];
          bar.className = cls;
          bar.style.left = `${left}%`;
          bar.style.width = `${Math.max(right - left, least)}%`;
        });
        if (opened.has(key)) showDetail(r);
        const want = previous ? previous.li.nextSibling : list.firstChild;
        if (want !== r.li) list.insertBefore(r.li, want);
        previous = r;
      }
      for (const [key, r] of rows) {
        if (!seen.has(key)) {
          r.li.remove();
          rows.delete(key);
        }
      }
    }

    return { el, update };
  }

  const KINDS = {
    step: "step", model: "model", tool: "tool", sleep: "sleep", interrupt: "wait", yield: "yield",
    resume: "resume", recovery: "recovery", finished: "end", failed: "end", cancelled: "end", emit: "event",
  };

  return { build, view, duration };
})();
