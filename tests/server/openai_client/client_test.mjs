// The official `openai` npm client against a running `minfer serve` (MINFER_BASE_URL, MINFER_MODEL):
// a non-streamed and a streamed chat completion, a legacy completion, the models list, the Responses
// API (responses.create streamed and not, a function call, previous_response_id, retrieve) and embeddings
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

// Responses API.
const rreq = { model, input: "Say something", max_output_tokens: 12, temperature: 0 };
const resp = await client.responses.create(rreq);
check(resp.object === "response" && resp.id.startsWith("resp_"), `responses.create: ${JSON.stringify(resp)}`);
check(["completed", "incomplete"].includes(resp.status), `response status ${resp.status}`);
check(resp.output[0].type === "message" && resp.output[0].content[0].type === "output_text", "output item");
check(typeof resp.output_text === "string" && resp.output_text === resp.output[0].content[0].text, "output_text");
check(resp.usage.total_tokens === resp.usage.input_tokens + resp.usage.output_tokens, "responses usage");

const rstream = await client.responses.create({ ...rreq, stream: true });
let rtext = "";
let seq = -1;
let terminal = null;
const seen = [];
for await (const event of rstream) {
  check(event.sequence_number === seq + 1, `sequence_number ${event.sequence_number} after ${seq}`);
  seq = event.sequence_number;
  seen.push(event.type);
  if (event.type === "response.output_text.delta") rtext += event.delta;
  if (event.type === "response.completed" || event.type === "response.incomplete") terminal = event.response;
}
check(seen[0] === "response.created" && seen[1] === "response.in_progress", `first events ${seen.slice(0, 2)}`);
check(rtext === resp.output_text, `streamed response text ${JSON.stringify(rtext)} != ${JSON.stringify(resp.output_text)}`);
check(terminal && terminal.status === resp.status && terminal.usage.output_tokens === resp.usage.output_tokens,
  "streamed terminal response");

const tools = [{ type: "function", name: "get_weather", description: "Weather for a city",
  parameters: { type: "object", properties: { city: { type: "string", maxLength: 8 } }, required: ["city"],
    additionalProperties: false }, strict: true }];
const called = await client.responses.create({ model, input: "Weather in Paris?", tools, tool_choice: "required",
  max_output_tokens: 300, temperature: 0, store: true });
const call = called.output.find((o) => o.type === "function_call");
check(call && call.name === "get_weather" && call.call_id.startsWith("call_"), `function_call: ${JSON.stringify(called.output)}`);
check(typeof JSON.parse(call.arguments).city === "string", `arguments ${call.arguments}`);
const stored = await client.responses.retrieve(called.id);
check(stored.id === called.id && JSON.stringify(stored.output) === JSON.stringify(called.output), "responses.retrieve");
const next = await client.responses.create({ model, previous_response_id: called.id, tools, max_output_tokens: 4,
  temperature: 0, input: [{ type: "function_call_output", call_id: call.call_id, output: "{\"temp\": 21}" }] });
check(next.previous_response_id === called.id, "previous_response_id echoed");
check(next.usage.input_tokens > called.usage.input_tokens, "the continued conversation is longer");

let missing = false;
try {
  await client.responses.retrieve("resp_unknown");
} catch (e) {
  missing = e.status === 404;
}
check(missing, "an unknown response id must be a 404");

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

console.log(`OK: openai ${OpenAI.VERSION ?? ""} non-streamed, streamed (${text.length} chars), completions, errors, ` +
  `responses (${seen.length} events, function call, previous_response_id), embeddings`);
