// The real @ag-ui/client HttpAgent against golem serve: runs the steps given on stdin
// ({url, threadId, steps: [{prompt} | {resume: [...]}]}) on one agent, and prints what
// each run saw (event types, outcome, interrupts, result) and the agent's messages.
import { HttpAgent } from "@ag-ui/client";

const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const job = JSON.parse(Buffer.concat(chunks).toString());

const agent = new HttpAgent({ url: job.url, threadId: job.threadId, headers: job.headers ?? {} });
const runs = [];
for (const [index, step] of job.steps.entries()) {
  if (step.prompt !== undefined) {
    agent.addMessage({ id: `user-${index}`, role: "user", content: step.prompt });
  }
  const seen = { events: [], outcome: null, interrupts: [], result: null, error: null };
  try {
    await agent.runAgent(step.resume ? { resume: step.resume } : {}, {
      onEvent: ({ event }) => {
        seen.events.push(event.type);
      },
      onRunFinishedEvent: (params) => {
        seen.outcome = params.outcome;
        seen.interrupts = params.outcome === "interrupt" ? params.interrupts : [];
        seen.result = params.outcome === "success" ? params.result ?? null : null;
      },
      onRunErrorEvent: ({ event }) => {
        seen.error = { code: event.code ?? null, message: event.message };
      },
    });
  } catch (error) {
    seen.error = seen.error ?? { code: null, message: String(error) };
  }
  runs.push(seen);
}
const messages = agent.messages.map((m) => ({
  role: m.role,
  content: m.content ?? null,
  toolCalls: (m.toolCalls ?? []).map((c) => c.id),
  toolCallId: m.toolCallId ?? null,
}));
process.stdout.write(JSON.stringify({ runs, messages }));
