// The official AG-UI client (HttpAgent) against an agent-unit server: prints one JSON report.
//
//   node client.mjs <server url> pause
//     greets (text events), then runs "refund" to its interrupt, is refused a bad answer,
//     resumes with a good one on the same HttpAgent, and parks a second refund for later.
//   node client.mjs <server url> resume <thread id> <interrupt id>
//     a fresh HttpAgent (nothing kept from the first process) answers that interrupt.
import { HttpAgent, buildResumeArray } from "@ag-ui/client";

const [url, mode, threadId, interruptId] = process.argv.slice(2);

// Anything the client strips or translates is warned about: the report carries the warnings.
const warnings = [];
console.warn = (...args) => warnings.push(args.map(String).join(" "));
console.error = () => {}; // a refused run is reported below, not logged

function agent(name, thread) {
  return new HttpAgent({ url: `${url}/agents/${name}/ag-ui`, threadId: thread });
}

// One AG-UI run: the events it saw, how it finished, and what the agent holds afterwards.
async function run(target, parameters) {
  const events = [];
  let finished = null;
  const subscriber = {
    onEvent: ({ event }) => {
      events.push(event.type);
    },
    onRunFinishedEvent: (params) => {
      finished = { outcome: params.outcome, interrupts: params.interrupts ?? [], runId: params.event.runId };
    },
  };
  try {
    const result = await target.runAgent(parameters, subscriber);
    return {
      events,
      finished,
      result: result.result ?? null,
      newMessages: result.newMessages.map((m) => ({ role: m.role, content: m.content })),
      pending: target.pendingInterrupts.map((i) => i.id),
    };
  } catch (error) {
    return { events, error: { status: error.status ?? null, payload: error.payload ?? String(error) } };
  }
}

const report = {};
if (mode === "pause") {
  const greeter = agent("greet", "thread-greet");
  greeter.addMessage({ id: "m1", role: "user", content: "Ada" });
  report.greet = await run(greeter, { runId: "ag-greet-1" });

  const refund = agent("refund", "thread-refund-a");
  refund.addMessage({ id: "m1", role: "user", content: JSON.stringify({ order_id: "o_1" }) });
  report.paused = await run(refund, { runId: "ag-refund-1" });
  const [open] = refund.pendingInterrupts;
  report.refused = await run(refund, {
    runId: "ag-refund-2",
    resume: [{ interruptId: open.id, status: "resolved", payload: { approved: "maybe" } }],
  });
  report.stillPending = refund.pendingInterrupts.map((i) => i.id);
  report.resumed = await run(refund, {
    runId: "ag-refund-3",
    resume: buildResumeArray(refund.pendingInterrupts, { [open.id]: { status: "resolved", payload: { approved: true } } }),
  });

  const later = agent("refund", "thread-refund-b");
  later.addMessage({ id: "m1", role: "user", content: JSON.stringify({ order_id: "o_2" }) });
  report.parked = await run(later, { runId: "ag-later-1" });
} else if (mode === "resume") {
  const fresh = agent("refund", threadId);
  report.resumed = await run(fresh, {
    runId: "ag-later-2",
    resume: [{ interruptId, status: "resolved", payload: { approved: true } }],
  });
} else {
  throw new Error(`unknown mode ${mode}: use pause or resume`);
}
report.warnings = warnings;
process.stdout.write(JSON.stringify(report) + "\n");
