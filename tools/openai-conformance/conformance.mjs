// Drives a running `k3 serve` with the official openai client and prints
// what it saw as one JSON object; ui/cli/serve_conformance_test.go starts
// the server, runs this script and checks the values.
//
//   K3_BASE_URL=http://127.0.0.1:PORT/v1 K3_API_KEY=KEY K3_MODEL=ID node conformance.mjs
import OpenAI from "openai";
import { zodResponseFormat } from "openai/helpers/zod";
import { z } from "zod";

const baseURL = process.env.K3_BASE_URL;
const apiKey = process.env.K3_API_KEY;
const model = process.env.K3_MODEL;
if (!baseURL || !apiKey || !model) {
  console.error("set K3_BASE_URL, K3_API_KEY and K3_MODEL");
  process.exit(2);
}

const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 120_000 });
const out = {};

const weather = {
  type: "function",
  function: {
    name: "get_weather",
    description: "Current weather in a city",
    parameters: {
      type: "object",
      properties: { city: { type: "string" }, days: { type: "integer" } },
      required: ["city"],
    },
  },
};

// errorOf runs f and reports the error the client raised.
async function errorOf(f) {
  try {
    await f();
    return { thrown: false };
  } catch (e) {
    return {
      thrown: true,
      class: e?.constructor?.name,
      status: e?.status,
      type: e?.type ?? e?.error?.type,
      code: e?.code ?? e?.error?.code,
      message: e?.message,
    };
  }
}

// 1. models
const models = [];
for await (const m of client.models.list()) models.push(m.id);
out.models = models;

// 2. a non-streaming chat turn
const first = [{ role: "user", content: "Hello there" }];
const chat = await client.chat.completions.create({ model, messages: first, max_tokens: 8 });
out.chat = {
  object: chat.object,
  content: chat.choices[0].message.content,
  reasoning: chat.choices[0].message.reasoning_content ?? null,
  finish: chat.choices[0].finish_reason,
  usage: chat.usage,
};

// 3. the same turn streamed, with usage
const stream = await client.chat.completions.create({
  model,
  messages: first,
  max_tokens: 8,
  stream: true,
  stream_options: { include_usage: true },
});
const s = { chunks: 0, roles: [], content: "", reasoning: "", finish: [], usage: null };
for await (const c of stream) {
  s.chunks++;
  if (c.usage) s.usage = c.usage;
  const ch = c.choices[0];
  if (!ch) continue;
  if (ch.delta.role) s.roles.push(ch.delta.role);
  if (ch.delta.content) s.content += ch.delta.content;
  if (ch.delta.reasoning_content) s.reasoning += ch.delta.reasoning_content;
  if (ch.finish_reason) s.finish.push(ch.finish_reason);
}
out.stream = s;

// 4. the second turn: the reply goes back as history; the server reuses
//    the state (cached_tokens) and says so in a header too
const second = [
  ...first,
  { role: "assistant", content: chat.choices[0].message.content ?? "", reasoning_content: chat.choices[0].message.reasoning_content },
  { role: "user", content: "And again?" },
];
const { data: turn2, response } = await client.chat.completions
  .create({ model, messages: second, max_tokens: 8 })
  .withResponse();
out.turn2 = {
  content: turn2.choices[0].message.content,
  reasoning: turn2.choices[0].message.reasoning_content ?? null,
  usage: turn2.usage,
  reusedHeader: response.headers.get("x-k3-reused-positions"),
};

// 5. a request with tools: the prompt the server rendered comes back as ids
const toolMessages = [
  { role: "system", content: "You can look up the weather." },
  { role: "user", content: [{ type: "text", text: "Weather in Paris?" }] },
];
const tools = await client.chat.completions.create({
  model,
  messages: toolMessages,
  tools: [weather],
  tool_choice: "auto",
  max_tokens: 4,
  return_token_ids: true,
});
out.tools = {
  promptTokenIDs: tools.prompt_token_ids,
  finish: tools.choices[0].finish_reason,
  toolCalls: tools.choices[0].message.tool_calls ?? [],
};

// 6. a raw completion
const comp = await client.completions.create({ model, prompt: "Once upon a time", max_tokens: 5 });
out.completion = { object: comp.object, text: comp.choices[0].text, finish: comp.choices[0].finish_reason, usage: comp.usage };

// 7. structured output: a zod schema through parse(), which throws if the
//    content does not fit; greedy and seeded, thinking on (the default).
//    And a required tool call whose arguments must parse.
const Person = z.object({ name: z.string(), age: z.number().int(), pets: z.array(z.enum(["cat", "dog"])) });
out.structured = [];
for (const seed of [0, 1, 2, 3]) {
  const r = await client.chat.completions.parse({
    model,
    messages: [{ role: "user", content: "Describe someone." }],
    response_format: zodResponseFormat(Person, "person"),
    max_tokens: 160,
    seed,
    temperature: seed === 0 ? 0 : 1,
  });
  out.structured.push({ parsed: r.choices[0].message.parsed, finish: r.choices[0].finish_reason });
}
out.required = [];
for (const seed of [0, 1]) {
  const r = await client.chat.completions.create({
    model,
    messages: toolMessages,
    tools: [weather],
    tool_choice: "required",
    max_tokens: 160,
    seed,
    temperature: seed,
  });
  const call = r.choices[0].message.tool_calls?.[0];
  out.required.push({ finish: r.choices[0].finish_reason, name: call?.function?.name, arguments: JSON.parse(call?.function?.arguments ?? "null") });
}

// 7b. logprobs streamed: the client's stream helper gathers the chunks'
//     logprobs into the final completion; they are the ones a reply not
//     streamed gives
const lpReq = { model, messages: first, max_tokens: 8, logprobs: true, top_logprobs: 2, reasoning_effort: "none" };
const lpFinal = await client.chat.completions.stream(lpReq).finalChatCompletion();
const lpPlain = await client.chat.completions.create(lpReq);
const lpOf = (c) => (c.choices[0].logprobs?.content ?? []).map((e) => [e.token, e.logprob, e.top_logprobs.length]);
out.logprobs = {
  streamed: lpOf(lpFinal),
  plain: lpOf(lpPlain),
  streamedContent: lpFinal.choices[0].message.content,
  plainContent: lpPlain.choices[0].message.content,
};

// 8. errors
out.errors = {
  model: await errorOf(() => client.chat.completions.create({ model: "no-such-model", messages: first })),
  badRequest: await errorOf(() => client.chat.completions.create({ model, messages: [] })),
  key: await errorOf(() =>
    new OpenAI({ baseURL, apiKey: "wrong-key", maxRetries: 0 }).chat.completions.create({ model, messages: first })),
};

// 9. busy: while a long generation streams (the server keeps no queue
//    place), another request gets 429; aborting the stream cancels it
const long = await client.chat.completions.create({
  model,
  messages: [{ role: "user", content: "Tell me everything." }],
  max_tokens: 100000,
  stream: true,
});
let seen = 0;
for await (const c of long) {
  if (c.choices[0]?.delta?.content || c.choices[0]?.delta?.reasoning_content) seen++;
  if (seen === 2) {
    out.errors.busy = await errorOf(() => client.chat.completions.create({ model, messages: first, max_tokens: 1 }));
    long.controller.abort();
    break;
  }
}
out.aborted = seen;

console.log(JSON.stringify(out));
