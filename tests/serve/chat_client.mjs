// The real `ai` package's chat (AbstractChat, DefaultChatTransport: what useChat runs)
// against golem serve. Job on stdin: {url, chatId, prompt, approved}. Sends the prompt,
// answers the first approval request with `approved` through addToolApprovalResponse
// (the chat sends the follow-up by itself), and prints the messages, any errors and the
// data parts it was sent (onData).
import {
  AbstractChat,
  DefaultChatTransport,
  lastAssistantMessageIsCompleteWithApprovalResponses,
} from "ai";

const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const job = JSON.parse(Buffer.concat(chunks).toString());

class State {
  constructor() {
    this.status = "ready";
    this.error = undefined;
    this.messages = [];
  }
  pushMessage(message) {
    this.messages = this.messages.concat(message);
  }
  popMessage() {
    this.messages = this.messages.slice(0, -1);
  }
  replaceMessage(index, message) {
    this.messages = [...this.messages.slice(0, index), message, ...this.messages.slice(index + 1)];
  }
  snapshot(thing) {
    return structuredClone(thing);
  }
}

class Chat extends AbstractChat {
  constructor(init) {
    super({ ...init, state: new State() });
  }
}

const errors = [];
const data = [];
let finished = 0;
const waiters = [];
const chat = new Chat({
  id: job.chatId,
  transport: new DefaultChatTransport({ api: job.url, headers: job.headers ?? {} }),
  sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
  onError: (error) => errors.push(String(error)),
  onData: (part) => data.push(part),
  onFinish: () => {
    finished += 1;
    waiters.splice(0).forEach((resolve) => resolve());
  },
});
const finishes = async (count) => {
  while (finished < count) await new Promise((resolve) => waiters.push(resolve));
};

await chat.sendMessage({ text: job.prompt });
if (chat.status !== "error") await finishes(1);
const afterAsk = structuredClone(chat.messages);
const asked = chat.messages.at(-1).parts.find((p) => p.state === "approval-requested");
if (asked) {
  await chat.addToolApprovalResponse({ id: asked.approval.id, approved: job.approved });
  await finishes(2);
}
const summary = (messages) =>
  messages.map((m) => ({
    id: m.id,
    role: m.role,
    parts: m.parts
      .filter((p) => p.type !== "step-start")
      .map((p) =>
        p.type === "text"
          ? { type: "text", text: p.text }
          : { type: p.type, state: p.state, toolCallId: p.toolCallId, output: p.output ?? null },
      ),
  }));
process.stdout.write(
  JSON.stringify({ asked: summary(afterAsk), messages: summary(chat.messages), errors, data }),
);
