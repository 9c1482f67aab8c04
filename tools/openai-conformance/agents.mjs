// Drives a running `k3 serve` through its agent APIs with the official
// clients - the openai client's Responses API and @anthropic-ai/sdk's
// Messages API, streamed and not, with a function tool and a tool round
// trip - and prints what they saw as one JSON object. The Go tests
// (ui/cli/serve_agents_test.go on the demo model, ui/serve/sdk_test.go on a
// scripted reply with tool calls) start the server, run this script and
// check the values.
//
//   K3_BASE_URL=http://127.0.0.1:PORT/v1 K3_API_KEY=KEY K3_MODEL=ID node agents.mjs
import OpenAI from "openai";
import Anthropic from "@anthropic-ai/sdk";

const baseURL = process.env.K3_BASE_URL;
const apiKey = process.env.K3_API_KEY;
const model = process.env.K3_MODEL;
if (!baseURL || !apiKey || !model) {
  console.error("set K3_BASE_URL, K3_API_KEY and K3_MODEL");
  process.exit(2);
}
const maxTokens = Number(process.env.K3_MAX_TOKENS || 8);

const openai = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 120_000 });
const anthropic = new Anthropic({ baseURL: baseURL.replace(/\/v1\/?$/, ""), apiKey, maxRetries: 0, timeout: 120_000 });
const out = {};

async function errorOf(f) {
  try {
    await f();
    return { thrown: false };
  } catch (e) {
    return {
      thrown: true,
      class: e?.constructor?.name,
      status: e?.status,
      type: e?.error?.error?.type ?? e?.error?.type ?? e?.type,
      message: e?.error?.error?.message ?? e?.error?.message ?? e?.message,
    };
  }
}

const question = "Weather in Paris?";
const fnTool = {
  type: "function",
  name: "get_weather",
  description: "Current weather in a city",
  parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"], additionalProperties: false },
  strict: false,
};

// what the Responses API returned, reduced to what the Go side checks
function responseOf(r) {
  return {
    id: r.id,
    object: r.object,
    status: r.status,
    types: r.output.map((i) => i.type),
    outputText: r.output_text ?? null,
    reasoning: r.output.filter((i) => i.type === "reasoning").map((i) => (i.content ?? []).map((c) => c.text).join("")).join(""),
    summary: r.output.filter((i) => i.type === "reasoning").map((i) => (i.summary ?? []).map((c) => c.text).join("")).join(""),
    calls: r.output.filter((i) => i.type === "function_call").map((i) => ({ name: i.name, arguments: i.arguments, callID: i.call_id })),
    usage: r.usage ?? null,
  };
}

// 1. Responses, not streamed, with a function tool
const base = { model, instructions: "Be brief.", input: question, tools: [fnTool], max_output_tokens: maxTokens, reasoning: { effort: "high" } };
const r1 = await openai.responses.create(base);
out.responses = responseOf(r1);

// 2. the same streamed with the client's stream helper (it rebuilds the
//    response from the events and refuses ones out of order)
const rs = openai.responses.stream(base);
const events = [];
let text = "";
let reasoning = "";
let args = "";
for await (const ev of rs) {
  events.push(ev.type);
  if (ev.type === "response.output_text.delta") text += ev.delta;
  if (ev.type === "response.reasoning_text.delta") reasoning += ev.delta;
  if (ev.type === "response.function_call_arguments.delta") args += ev.delta;
}
const final = await rs.finalResponse();
out.responsesStream = { events, text, reasoning, args, final: responseOf(final) };

// 2b. a reasoning summary asked for, not streamed and streamed with the
//     helper (it must accept the reasoning_summary events)
const sbase = { ...base, reasoning: { effort: "high", summary: "auto" } };
const rsum = await openai.responses.create(sbase);
const ss = openai.responses.stream(sbase);
const sevents = [];
let sdelta = "";
for await (const ev of ss) {
  sevents.push(ev.type);
  if (ev.type === "response.reasoning_summary_text.delta") sdelta += ev.delta;
}
out.responsesSummary = { plain: responseOf(rsum), events: sevents, deltas: sdelta, final: responseOf(await ss.finalResponse()) };

// 3. the round trip: the calls (or, when the model made none, one written
//    here) and their outputs go back as input items
let back = r1.output.filter((i) => i.type === "function_call");
if (back.length === 0) back = [{ type: "function_call", call_id: "call_1", name: "get_weather", arguments: '{"city":"Paris"}' }];
const r3 = await openai.responses.create({
  ...base,
  input: [
    { role: "user", content: [{ type: "input_text", text: question }] },
    ...r1.output.filter((i) => i.type !== "function_call"),
    ...back,
    ...back.map((c) => ({ type: "function_call_output", call_id: c.call_id, output: "sunny, 21 C" })),
  ],
});
out.responsesRoundTrip = responseOf(r3);

// 4. the same first turn over chat completions, to compare
const chat = await openai.chat.completions.create({
  model,
  messages: [{ role: "system", content: "Be brief." }, { role: "user", content: question }],
  tools: [{ type: "function", function: { name: fnTool.name, description: fnTool.description, parameters: fnTool.parameters } }],
  max_tokens: maxTokens,
  reasoning_effort: "high",
});
out.chat = {
  content: chat.choices[0].message.content ?? "",
  reasoning: chat.choices[0].message.reasoning_content ?? "",
  calls: (chat.choices[0].message.tool_calls ?? []).map((c) => ({ name: c.function.name, arguments: c.function.arguments })),
  promptTokens: chat.usage.prompt_tokens,
};

// 5. Anthropic Messages, not streamed, with a tool and thinking
const tool = { name: "get_weather", description: "Current weather in a city", input_schema: fnTool.parameters };
const mbase = {
  model,
  max_tokens: maxTokens,
  system: "Be brief.",
  thinking: { type: "enabled", budget_tokens: 16000 },
  tools: [tool],
  messages: [{ role: "user", content: question }],
};
function messageOf(m) {
  return {
    id: m.id,
    type: m.type,
    role: m.role,
    types: m.content.map((b) => b.type),
    thinking: m.content.filter((b) => b.type === "thinking").map((b) => b.thinking).join(""),
    signatures: m.content.filter((b) => b.type === "thinking").map((b) => b.signature),
    text: m.content.filter((b) => b.type === "text").map((b) => b.text).join(""),
    toolUses: m.content.filter((b) => b.type === "tool_use").map((b) => ({ id: b.id, name: b.name, input: b.input })),
    stopReason: m.stop_reason,
    usage: m.usage,
  };
}
const m1 = await anthropic.messages.create(mbase);
out.messages = messageOf(m1);

// 6. streamed with the client's stream helper
const ms = anthropic.messages.stream(mbase);
const mevents = [];
let mtext = "";
let mthinking = "";
const inputs = [];
ms.on("streamEvent", (ev) => mevents.push(ev.type));
ms.on("text", (d) => (mtext += d));
ms.on("thinking", (d) => (mthinking += d));
ms.on("inputJson", (_, snapshot) => inputs.push(snapshot));
const mfinal = await ms.finalMessage();
out.messagesStream = { events: mevents, text: mtext, thinking: mthinking, inputs, final: messageOf(mfinal) };

// 7. the round trip: tool_use blocks back, tool_result blocks for them
let uses = m1.content.filter((b) => b.type === "tool_use");
let assistant = m1.content;
if (uses.length === 0) {
  uses = [{ type: "tool_use", id: "toolu_1", name: "get_weather", input: { city: "Paris" } }];
  assistant = [...m1.content, ...uses];
}
const m3 = await anthropic.messages.create({
  ...mbase,
  messages: [
    { role: "user", content: question },
    { role: "assistant", content: assistant },
    { role: "user", content: uses.map((u) => ({ type: "tool_result", tool_use_id: u.id, content: "sunny, 21 C" })) },
  ],
});
out.messagesRoundTrip = messageOf(m3);

// 8. thinking off: no thinking block
const m4 = await anthropic.messages.create({ ...mbase, thinking: { type: "disabled" } });
out.messagesNoThinking = messageOf(m4);

// 9. errors
out.errors = {
  responsesPrevious: await errorOf(() => openai.responses.create({ ...base, previous_response_id: "resp_1" })),
  responsesModel: await errorOf(() => openai.responses.create({ ...base, model: "no-such-model" })),
  messagesModel: await errorOf(() => anthropic.messages.create({ ...mbase, model: "no-such-model" })),
  messagesKey: await errorOf(() =>
    new Anthropic({ baseURL: baseURL.replace(/\/v1\/?$/, ""), apiKey: "wrong-key", maxRetries: 0 }).messages.create(mbase)),
  messagesBad: await errorOf(() => anthropic.messages.create({ ...mbase, messages: [] })),
};

console.log(JSON.stringify(out));
