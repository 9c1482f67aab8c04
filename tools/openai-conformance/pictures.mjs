// Pictures through the official clients against a running `k3 serve` on the
// demo model: each picture of K3_PICTURES (a JSON list of {file, label})
// is sent as an openai chat.completions image_url part (a data: URL) and as
// an @anthropic-ai/sdk messages image block (base64), before the question
// "What is in this picture?". Prints {"openai": [reply, ...], "anthropic":
// [...]}; ui/cli/serve_pictures_test.go writes the pictures, starts the
// server and checks that the replies name them.
//
//   K3_BASE_URL=http://127.0.0.1:PORT/v1 K3_API_KEY=KEY K3_MODEL=ID K3_PICTURES=list.json node pictures.mjs
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import OpenAI from "openai";
import Anthropic from "@anthropic-ai/sdk";

const baseURL = process.env.K3_BASE_URL;
const apiKey = process.env.K3_API_KEY;
const model = process.env.K3_MODEL;
const list = process.env.K3_PICTURES;
if (!baseURL || !apiKey || !model || !list) {
  console.error("set K3_BASE_URL, K3_API_KEY, K3_MODEL and K3_PICTURES");
  process.exit(2);
}
const openai = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 300_000 });
const anthropic = new Anthropic({ baseURL: baseURL.replace(/\/v1$/, ""), apiKey, maxRetries: 0, timeout: 300_000 });
const question = "What is in this picture?";
const pictures = JSON.parse(readFileSync(list, "utf8"));

const out = { openai: [], anthropic: [] };
for (const p of pictures) {
  const data = readFileSync(join(dirname(list), p.file)).toString("base64");
  const chat = await openai.chat.completions.create({
    model,
    max_tokens: 200,
    messages: [{
      role: "user",
      content: [
        { type: "image_url", image_url: { url: `data:image/png;base64,${data}` } },
        { type: "text", text: question },
      ],
    }],
  });
  out.openai.push(chat.choices[0].message.content ?? "");
  const msg = await anthropic.messages.create({
    model,
    max_tokens: 200,
    messages: [{
      role: "user",
      content: [
        { type: "image", source: { type: "base64", media_type: "image/png", data } },
        { type: "text", text: question },
      ],
    }],
  });
  out.anthropic.push(msg.content.filter((b) => b.type === "text").map((b) => b.text).join(""));
}
console.log(JSON.stringify(out));
