// Structured output through the official clients against a running
// `k3 serve`: openai chat.completions.parse (zodResponseFormat) and
// responses.parse (zodTextFormat) with zod 4's .int() and bounded numbers,
// a forced tool call whose schema has bounds, @anthropic-ai/sdk with
// output_config.format, and the AI SDK's generateObject when `ai` is
// installed. Each runs on K3_SEEDS seeds (default 20); every output is
// checked with the zod schema itself. Prints one JSON object;
// ui/cli/serve_structured_test.go starts the server and checks it.
//
//   K3_BASE_URL=http://127.0.0.1:PORT/v1 K3_API_KEY=KEY K3_MODEL=ID node structured.mjs
import OpenAI from "openai";
import Anthropic from "@anthropic-ai/sdk";
import { zodResponseFormat, zodTextFormat } from "openai/helpers/zod";
import { zodOutputFormat } from "@anthropic-ai/sdk/helpers/zod";
import { z } from "zod/v4";

const baseURL = process.env.K3_BASE_URL;
const apiKey = process.env.K3_API_KEY;
const model = process.env.K3_MODEL;
const seeds = Number(process.env.K3_SEEDS ?? 20);
if (!baseURL || !apiKey || !model) {
  console.error("set K3_BASE_URL, K3_API_KEY and K3_MODEL");
  process.exit(2);
}
const openai = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 300_000 });
const anthropic = new Anthropic({ baseURL: baseURL.replace(/\/v1$/, ""), apiKey, maxRetries: 0, timeout: 300_000 });

// zod 4 writes .int() as an integer bounded by ±(2^53-1)
const Review = z.object({
  title: z.string().max(12),
  stars: z.number().int().min(1).max(5),
  score: z.number().min(0).max(1),
  count: z.number().int(),
  day: z.iso.date(),
  tags: z.array(z.enum(["good", "bad"])).max(3),
});
// what zodOutputFormat keeps (it moves bounds into descriptions)
const Plain = z.object({ title: z.string(), count: z.number().int(), tags: z.array(z.enum(["good", "bad"])) });
const bounded = z.toJSONSchema(Review, { target: "draft-7" });

const out = {};

// run calls f(seed) for every seed and records what the schema says of it
async function run(name, f) {
  const rows = [];
  for (let i = 0; i < seeds; i++) {
    try {
      const r = await f(i);
      rows.push({ ok: r.ok, finish: r.finish ?? null, value: r.value ?? null, calls: r.calls ?? null, error: r.error ?? null });
    } catch (e) {
      rows.push({ ok: false, error: `${e?.constructor?.name}: ${e?.message}` });
    }
  }
  out[name] = rows;
}

const prompt = (i) => `Review film number ${i} as JSON.`;
const check = (schema, v) => {
  const r = schema.safeParse(v);
  return { ok: r.success, error: r.success ? null : JSON.stringify(r.error.issues) };
};

await run("chatParse", async (i) => {
  const c = await openai.chat.completions.parse({
    model, messages: [{ role: "user", content: prompt(i) }], response_format: zodResponseFormat(Review, "review"),
    max_tokens: 200, seed: i, temperature: 1, reasoning_effort: "none",
  });
  const m = c.choices[0].message;
  return { ...check(Review, m.parsed), finish: c.choices[0].finish_reason, value: m.parsed };
});

await run("responsesParse", async (i) => {
  const r = await openai.responses.parse({
    model, input: prompt(i), text: { format: zodTextFormat(Review, "review") }, max_output_tokens: 200, temperature: 1,
  });
  return { ...check(Review, r.output_parsed), finish: r.status, value: r.output_parsed };
});

await run("toolCall", async (i) => {
  const c = await openai.chat.completions.create({
    model, messages: [{ role: "user", content: prompt(i) }], max_tokens: 400, seed: i, temperature: 1, reasoning_effort: "none",
    tools: [{ type: "function", function: { name: "rate", strict: true, parameters: bounded } }],
    tool_choice: { type: "function", function: { name: "rate" } },
  });
  const calls = c.choices[0].message.tool_calls ?? [];
  const checks = calls.map((t) => check(Review, JSON.parse(t.function.arguments)));
  const bad = checks.find((x) => !x.ok);
  return { ok: calls.length > 0 && !bad, error: bad?.error, finish: c.choices[0].finish_reason, calls: calls.length, value: calls.map((t) => t.function.arguments) };
});

await run("anthropicParse", async (i) => {
  const m = await anthropic.messages.parse({
    model, max_tokens: 200, messages: [{ role: "user", content: prompt(i) }], output_config: { format: zodOutputFormat(Plain) },
  });
  return { ...check(Plain, m.parsed_output), finish: m.stop_reason, value: m.parsed_output };
});

await run("anthropicBounds", async (i) => {
  const m = await anthropic.messages.create({
    model, max_tokens: 200, messages: [{ role: "user", content: prompt(i) }],
    output_config: { format: { type: "json_schema", schema: bounded } },
  });
  const text = m.content.filter((b) => b.type === "text").map((b) => b.text).join("");
  const v = JSON.parse(text);
  return { ...check(Review, v), finish: m.stop_reason, value: v };
});

// the AI SDK, when installed
let ai, compat;
try {
  ai = await import("ai");
  compat = await import("@ai-sdk/openai-compatible");
} catch (e) {
  out.aiSdk = { skipped: `${e?.message}` };
}
if (ai && compat) {
  const provider = compat.createOpenAICompatible({ name: "k3", baseURL, apiKey, supportsStructuredOutputs: true });
  await run("aiSdk", async (i) => {
    const r = await ai.generateObject({
      model: provider(model), schema: Review, prompt: prompt(i), seed: i, temperature: 1, maxOutputTokens: 200, maxRetries: 0,
      providerOptions: { k3: { reasoning_effort: "none" } },
    });
    return { ...check(Review, r.object), finish: r.finishReason, value: r.object };
  });
}

console.log(JSON.stringify(out));
