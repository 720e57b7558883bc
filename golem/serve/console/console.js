// golem's console: a chat page on golem serve's REST API (no build step, no dependencies).
// Turns stream from /conversations/{id}/events; waiting calls are approved (their arguments
// edited or not) or denied with a reason in place, a client-run tool's call answered in a
// form built from its result schema; the server's refusal is shown there.

const $ = (id) => document.getElementById(id);
const state = { conversation: location.hash.slice(1) || null, answer: null, lastId: "" };

const headers = (more = {}) => {
  const token = localStorage.getItem("golem.token") || "";
  return token ? { ...more, Authorization: `Bearer ${token}` } : more;
};

async function api(path, options = {}) {
  const response = await fetch(path, { ...options, headers: headers(options.headers) });
  if (response.status === 204) return null;
  const body = await response.json();
  if (!response.ok) throw new Error(body.error || response.statusText);
  return body;
}

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  Object.entries(attrs).forEach(([k, v]) => (k === "class" ? (node.className = v) : node.setAttribute(k, v)));
  children.forEach((c) => node.append(c));
  return node;
}

function say(role, text = "") {
  const node = el("div", { class: `msg ${role}` }, el("span", { class: "text" }, text));
  $("log").append(node);
  node.scrollIntoView();
  return node;
}

function fold(node, summary, detail) {
  const details = el("details", {}, el("summary", {}, summary), el("pre", {}, detail));
  node.append(details);
  return details;
}

// Server-sent events read with fetch (EventSource cannot send a token).
async function* events(response) {
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value.replace(/\r\n/g, "\n");
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      const fields = {};
      for (const line of block.split("\n")) {
        if (!line || line.startsWith(":")) continue;
        const at = line.indexOf(": ");
        fields[line.slice(0, at)] = line.slice(at + 2);
      }
      if (fields.event) yield fields;
    }
  }
}

async function relay(response) {
  if (!response.ok || response.status === 204) return;
  let answer = state.answer || say("assistant");
  state.answer = answer;
  const text = answer.querySelector(".text");
  let streamed = false;
  for await (const event of events(response)) {
    state.lastId = event.id || state.lastId;
    const data = JSON.parse(event.data);
    if (event.event === "text_delta" && data.delta) {
      text.textContent += data.delta.text;
      streamed = true;
    } else if (event.event === "model_end" && data.message) {
      if (!streamed && data.message.content) text.textContent += data.message.content;
      streamed = false;
    } else if (event.event === "tool_end" && data.call) {
      fold(answer, `tool ${data.call.name}`, `${data.call.args}\n→ ${data.message.content}`);
    } else if (event.event === "waiting") {
      data.waiting.forEach((call) => (call.kind === "result" ? fill(answer, call) : ask(answer, call)));
    } else if (event.event === "result") {
      state.answer = null;
      if (data.link) answer.append(el("a", { href: data.link, target: "_blank", class: "status" }, "workflow in the Temporal UI"));
    } else if (event.event === "failed") {
      answer.append(el("div", { class: "error" }, `failed (${data.stage}): ${data.message}`));
      state.answer = null;
    }
  }
  refresh();
}

// A waiting call: approve it (its arguments edited or not) or deny it with a reason.
function ask(answer, call) {
  const box = el("div", { class: "msg waiting" }, `approve ${call.name}(${call.args})? `);
  const args = el("textarea", { class: "args", rows: "3", spellcheck: "false", "aria-label": "arguments" });
  args.value = pretty(call.args);
  const reason = el("input", { class: "reason", placeholder: "a reason, if you deny it (the model reads it)", "aria-label": "reason" });
  const problem = el("div", { class: "error" });
  const yes = el("button", {}, "Approve");
  const no = el("button", {}, "Deny");
  const decide = async (approved) => {
    problem.textContent = "";
    const decision = { approved };
    if (approved) {
      let edited;
      try {
        edited = JSON.parse(args.value);
      } catch (error) {
        problem.textContent = `the arguments are not JSON: ${error.message}`;
        return;
      }
      if (edited === null || typeof edited !== "object" || Array.isArray(edited)) {
        problem.textContent = "the arguments must be a JSON object";
        return;
      }
      if (JSON.stringify(edited) !== JSON.stringify(parsed(call.args))) decision.args = edited;
    } else if (reason.value.trim()) {
      decision.reason = reason.value.trim();
    }
    const controls = [yes, no, args, reason];
    controls.forEach((c) => (c.disabled = true));
    const response = await fetch(`/conversations/${state.conversation}/decisions`, {
      method: "POST",
      headers: headers({ "content-type": "application/json", accept: "text/event-stream" }),
      body: JSON.stringify({ decisions: { [call.id]: decision } }),
    });
    if (!response.ok) { // refused, nothing sent to the run: say why and let the person try again
      const body = await response.json().catch(() => ({}));
      problem.textContent = `refused (${response.status}): ${body.error || response.statusText}`;
      controls.forEach((c) => (c.disabled = false));
      return;
    }
    const verdict = approved ? (decision.args ? " approved with edited arguments" : " approved") : " denied";
    box.append(el("span", { class: "status" }, decision.reason ? `${verdict}: ${decision.reason}` : verdict));
    await relay(response);
  };
  yes.onclick = () => decide(true);
  no.onclick = () => decide(false);
  box.append(args, reason, el("div", {}, yes, " ", no), problem);
  answer.append(box);
}

// A client-run tool's call: the person gives its result, in a form built from the tool's
// result schema (one field per property of an object, one for a string, number or boolean,
// else JSON), or fails it with a reason; the run goes on with what they gave.
function fill(answer, call) {
  const box = el("div", { class: "msg waiting" }, `${call.name}(${call.args}) needs a result from you `);
  const form = schemaForm(call.resultSchema || null);
  const reason = el("input", { class: "reason", placeholder: "why it failed, to fail it instead (the model reads it)", "aria-label": "failure" });
  const problem = el("div", { class: "error" });
  const send = el("button", {}, "Send result");
  const fail = el("button", {}, "Fail it");
  const answerWith = async (entry) => {
    const controls = [send, fail, reason, ...form.inputs];
    controls.forEach((c) => (c.disabled = true));
    const response = await fetch(`/conversations/${state.conversation}/tool-results`, {
      method: "POST",
      headers: headers({ "content-type": "application/json", accept: "text/event-stream" }),
      body: JSON.stringify({ results: { [call.id]: entry } }),
    });
    if (!response.ok) {
      const body = await response.json().catch(() => ({}));
      problem.textContent = `refused (${response.status}): ${body.error || response.statusText}`;
      controls.forEach((c) => (c.disabled = false));
      return;
    }
    box.append(el("span", { class: "status" }, entry.error ? ` failed: ${entry.error}` : " result sent"));
    await relay(response);
  };
  send.onclick = () => {
    problem.textContent = "";
    let value;
    try {
      value = form.value();
    } catch (error) {
      problem.textContent = error.message;
      return;
    }
    answerWith({ result: value });
  };
  fail.onclick = () => {
    if (!reason.value.trim()) {
      problem.textContent = "say why it failed";
      return;
    }
    answerWith({ error: reason.value.trim() });
  };
  box.append(form.node, reason, el("div", {}, send, " ", fail), problem);
  answer.append(box);
}

function field(name, schema) {
  const type = (schema && schema.type) || "";
  const label = schema && schema.description ? `${name}: ${schema.description}` : name;
  if (type === "boolean") {
    const input = el("input", { type: "checkbox", "aria-label": label });
    return { input, node: el("label", { class: "field" }, input, ` ${name}`), value: () => input.checked };
  }
  const input = el("input", { class: "value", "aria-label": label, placeholder: schema && schema.pattern ? `${name} (${schema.pattern})` : name });
  if (type === "number" || type === "integer") input.type = "number";
  const value = () => {
    if (type !== "number" && type !== "integer") return input.value;
    if (input.value === "" || Number.isNaN(Number(input.value))) throw new Error(`${name} must be a number`);
    return Number(input.value);
  };
  return { input, node: input, value };
}

function schemaForm(schema) {
  const type = (schema && schema.type) || "";
  if (type === "object" && schema.properties) {
    const fields = Object.entries(schema.properties).map(([name, sub]) => [name, field(name, sub)]);
    return {
      node: el("div", {}, ...fields.map(([, f]) => f.node)),
      inputs: fields.map(([, f]) => f.input),
      value: () => Object.fromEntries(fields.map(([name, f]) => [name, f.value()])),
    };
  }
  if (["string", "number", "integer", "boolean"].includes(type)) {
    const one = field("result", schema);
    return { node: one.node, inputs: [one.input], value: one.value };
  }
  const text = el("textarea", { class: "args", rows: "3", "aria-label": "result", placeholder: "the result: text, or JSON" });
  const value = () => {
    if (!schema) return text.value; // no schema: text as it is
    try {
      return JSON.parse(text.value);
    } catch (error) {
      throw new Error(`the result is not JSON: ${error.message}`);
    }
  };
  return { node: text, inputs: [text], value };
}

function parsed(text) {
  try {
    return JSON.parse(text || "{}");
  } catch {
    return text;
  }
}

function pretty(text) {
  const value = parsed(text);
  return typeof value === "string" ? value : JSON.stringify(value);
}

async function follow() {
  const response = await fetch(`/conversations/${state.conversation}/events`, { headers: headers() });
  await relay(response);
}

async function open(id) {
  state.conversation = id;
  state.answer = null;
  location.hash = id;
  $("log").replaceChildren();
  const conversation = await api(`/conversations/${id}`);
  // Each turn as it streamed: its question, then one answer with its tool calls folded in.
  let answer = null;
  const args = {};
  for (const m of conversation.messages) {
    if (m.role === "user") {
      say("user", m.content);
      answer = null;
    } else if (m.role === "assistant") {
      answer = answer || say("assistant");
      (m.toolCalls || []).forEach((call) => (args[call.id] = call.args));
      if (m.content) answer.querySelector(".text").textContent += m.content;
    } else if (m.role === "tool" && answer) {
      fold(answer, `tool ${m.toolName}`, `${args[m.toolCallId] ?? ""}\n→ ${m.content}`);
    }
  }
  if (conversation.prompt) say("user", conversation.prompt); // the turn in flight's question
  if (conversation.turn) await follow(); // a turn in flight or waiting: its events from the start
}

// A conversation id's end: a UUIDv7 begins with its time, the same for ids a minute apart.
const short = (id) => (id.length > 12 ? `…${id.slice(-8)}` : id);

async function refresh() {
  const listed = await api("/conversations");
  $("conversations").replaceChildren(
    ...listed.conversations.map((c) => {
      const item = el("li", { title: c.id }, `${short(c.id)} `, el("span", { class: "status" }, `${c.agent} · ${c.status}`));
      item.onclick = () => open(c.id);
      return item;
    }),
  );
  const inbox = await api("/pending");
  $("pending").replaceChildren(
    ...inbox.pending.map((p) => {
      const item = el("li", { title: p.conversationId }, `${p.name}(${p.args}) `, el("span", { class: "status" }, short(p.conversationId)));
      item.onclick = () => open(p.conversationId);
      return item;
    }),
  );
}

$("ask").onsubmit = async (event) => {
  event.preventDefault();
  const text = $("prompt").value.trim();
  if (!text) return;
  $("prompt").value = "";
  if (!state.conversation) {
    const created = await api("/conversations", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ agent: $("agent").value }),
    });
    state.conversation = created.id;
    location.hash = created.id;
  }
  say("user", text);
  try {
    await api(`/conversations/${state.conversation}/messages`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ text }),
    });
  } catch (error) {
    say("assistant", "").append(el("div", { class: "error" }, String(error.message)));
    return;
  }
  await follow();
};

$("new").onclick = () => {
  state.conversation = null;
  state.answer = null;
  location.hash = "";
  $("log").replaceChildren();
};

$("token").value = localStorage.getItem("golem.token") || "";
$("token").onchange = () => {
  localStorage.setItem("golem.token", $("token").value.trim());
  refresh();
};

const opened = state.conversation; // the page's own address: a conversation asked meanwhile is not reopened
const document_ = await (await fetch("/openapi.json")).json();
const agents = document_.paths["/agents/{agent}/agui"].post.parameters[0].schema.enum;
$("agent").replaceChildren(...agents.map((a) => el("option", {}, a)));
$("agentline").textContent = agents.join(", ");
await refresh().catch(() => {});
if (opened && state.conversation === opened) await open(opened);
