// The official `openai` npm client against a running `minfer serve` (MINFER_BASE_URL, MINFER_MODEL):
// a non-streamed and a streamed chat completion, a legacy completion, the models list and embeddings
// (the server runs with --embeddings). Exits non-zero
// with a message on the first mismatch.
import OpenAI from "openai";

const baseURL = process.env.MINFER_BASE_URL;
const model = process.env.MINFER_MODEL;
const client = new OpenAI({ baseURL, apiKey: process.env.MINFER_API_KEY ?? "none", maxRetries: 0, timeout: 120000 });

function check(cond, what) {
  if (!cond) {
    console.error(`FAIL: ${what}`);
    process.exit(1);
  }
}

const models = await client.models.list();
check(models.data.length === 1 && models.data[0].id === model, `models.list: ${JSON.stringify(models.data)}`);

const req = { model, messages: [{ role: "user", content: "Say something" }], max_tokens: 12, temperature: 0.7, seed: 5 };
const plain = await client.chat.completions.create(req);
check(plain.object === "chat.completion", "object");
check(typeof plain.choices[0].message.content === "string", "message.content");
check(["stop", "length"].includes(plain.choices[0].finish_reason), `finish_reason ${plain.choices[0].finish_reason}`);
check(plain.usage.total_tokens === plain.usage.prompt_tokens + plain.usage.completion_tokens, "usage");

const stream = await client.chat.completions.create({ ...req, stream: true, stream_options: { include_usage: true } });
let text = "";
let finish = null;
let usage = null;
for await (const chunk of stream) {
  if (chunk.usage) usage = chunk.usage;
  for (const c of chunk.choices) {
    text += c.delta?.content ?? "";
    if (c.finish_reason) finish = c.finish_reason;
  }
}
check(text === plain.choices[0].message.content, `streamed text ${JSON.stringify(text)} != ${JSON.stringify(plain.choices[0].message.content)}`);
check(finish === plain.choices[0].finish_reason, "streamed finish_reason");
check(usage && usage.completion_tokens === plain.usage.completion_tokens, "streamed usage");

const legacy = await client.completions.create({ model, prompt: "Once upon a time", max_tokens: 5, temperature: 0 });
check(typeof legacy.choices[0].text === "string", "completions text");

let refused = false;
try {
  await client.chat.completions.create({ ...req, temperature: 5 });
} catch (e) {
  refused = e.status === 400 && String(e.message).includes("temperature");
}
check(refused, "temperature 5 must be a 400 naming the field");

// embeddings.create: the client asks for base64 unless told otherwise and decodes it to floats.
const emb = await client.embeddings.create({ model, input: ["hello world", "goodbye"] });
check(emb.object === "list" && emb.data.length === 2, `embeddings: ${JSON.stringify(emb).slice(0, 200)}`);
check(emb.data[1].index === 1 && emb.usage.prompt_tokens > 0, "embeddings index / usage");
const v0 = emb.data[0].embedding;
const n0 = Math.sqrt(v0.reduce((s, x) => s + x * x, 0));
check(v0.length > 0 && Math.abs(n0 - 1) < 1e-4, `embedding norm ${n0}`);
const asFloat = await client.embeddings.create({ model, input: "hello world", encoding_format: "float" });
const d = Math.max(...asFloat.data[0].embedding.map((x, i) => Math.abs(x - v0[i])));
check(asFloat.data[0].embedding.length === v0.length && d < 1e-6, `base64 vs float embeddings differ by ${d}`);
const cut = await client.embeddings.create({ model, input: "hello world", dimensions: 8, encoding_format: "float" });
check(cut.data[0].embedding.length === 8, "embeddings dimensions");

console.log(`OK: openai ${OpenAI.VERSION ?? ""} non-streamed, streamed (${text.length} chars), completions, embeddings, errors`);
