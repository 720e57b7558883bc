// The real @ag-ui/client HttpAgent against golem serve: runs the steps given on stdin
// ({url, threadId, tools?, steps: [{prompt} | {resume: [...]} | {results: {callId: text}}]})
// on one agent, and prints what each run saw (event types, outcome, interrupts, pending
// frontend tool calls, result) and the agent's messages. `tools` are frontend tools, sent
// with every run; a `results` step answers their calls with tool messages.
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
  for (const [toolCallId, content] of Object.entries(step.results ?? {})) {
    agent.addMessage({ id: `tool-${index}-${toolCallId}`, role: "tool", toolCallId, content });
  }
  const seen = { events: [], outcome: null, interrupts: [], pending: [], result: null, error: null };
  const input = { ...(step.resume ? { resume: step.resume } : {}), tools: job.tools ?? [] };
  try {
    await agent.runAgent(input, {
      onEvent: ({ event }) => {
        seen.events.push(event.type);
      },
      onRunFinishedEvent: (params) => {
        seen.outcome = params.outcome;
        seen.interrupts = params.outcome === "interrupt" ? params.interrupts : [];
        seen.result = params.outcome === "success" ? params.result ?? null : null;
        seen.pending = params.outcome === "success" ? params.pendingToolCallIds : [];
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
