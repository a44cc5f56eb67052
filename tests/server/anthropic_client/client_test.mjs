// The official `@anthropic-ai/sdk` npm client against a running `minfer serve` (MINFER_BASE_URL,
// MINFER_MODEL, MINFER_API_KEY sent as x-api-key): messages.create non-streamed and streamed (raw events
// and the MessageStream helper), tool use across two turns, countTokens, and errors. Exits non-zero with
// a message on the first mismatch.
import Anthropic from "@anthropic-ai/sdk";

const baseURL = process.env.MINFER_BASE_URL;
const model = process.env.MINFER_MODEL;
const apiKey = process.env.MINFER_API_KEY;
const client = new Anthropic({ baseURL, apiKey, maxRetries: 0, timeout: 120000 });

function check(cond, what) {
  if (!cond) {
    console.error(`FAIL: ${what}`);
    process.exit(1);
  }
}
const json = (v) => JSON.stringify(v);

const req = {
  model,
  max_tokens: 12,
  system: "You are terse.",
  messages: [{ role: "user", content: "Say something" }],
  temperature: 0,
  metadata: { user_id: "npm-test" },
};
const plain = await client.messages.create(req);
check(plain.type === "message" && plain.role === "assistant", `type/role ${json(plain)}`);
check(plain.id.startsWith("msg_"), `id ${plain.id}`);
check(["end_turn", "max_tokens"].includes(plain.stop_reason), `stop_reason ${plain.stop_reason}`);
check(plain.usage.output_tokens > 0 && plain.usage.output_tokens <= 12, `usage ${json(plain.usage)}`);
const inputOf = (u) => u.input_tokens + (u.cache_read_input_tokens ?? 0);
const textOf = (m) => m.content.filter((b) => b.type === "text").map((b) => b.text).join("");

// Raw streamed events.
const stream = await client.messages.create({ ...req, stream: true });
const seen = [];
let text = "";
let stopReason = null;
let outputTokens = null;
for await (const ev of stream) {
  seen.push(ev.type);
  if (ev.type === "content_block_delta" && ev.delta.type === "text_delta") text += ev.delta.text;
  if (ev.type === "message_delta") {
    stopReason = ev.delta.stop_reason;
    outputTokens = ev.usage.output_tokens;
  }
}
check(seen[0] === "message_start" && seen.at(-1) === "message_stop", `event order ${json(seen)}`);
check(text === textOf(plain), `streamed text ${json(text)} != ${json(textOf(plain))}`);
check(stopReason === plain.stop_reason, "streamed stop_reason");
check(outputTokens === plain.usage.output_tokens, "streamed usage");

// The MessageStream helper assembles the same message.
const helper = client.messages.stream(req);
const final = await helper.finalMessage();
check(textOf(final) === textOf(plain), `stream helper text ${json(textOf(final))}`);
check(final.stop_reason === plain.stop_reason, "stream helper stop_reason");

// count_tokens equals the prompt the server rendered.
const counted = await client.messages.countTokens({ model, system: req.system, messages: req.messages });
check(counted.input_tokens === inputOf(plain.usage), `countTokens ${counted.input_tokens} != ${json(plain.usage)}`);

// Tool use across two turns.
const tools = [
  {
    name: "get_weather",
    description: "Weather in a city",
    input_schema: {
      type: "object",
      properties: { city: { type: "string", maxLength: 8 } },
      required: ["city"],
      additionalProperties: false,
    },
  },
];
const first = await client.messages.create({
  model,
  max_tokens: 80,
  temperature: 0,
  tools,
  tool_choice: { type: "any" },
  messages: [{ role: "user", content: "Weather in Paris?" }],
});
check(first.stop_reason === "tool_use", `tool stop_reason ${first.stop_reason} ${json(first.content)}`);
const use = first.content.find((b) => b.type === "tool_use");
check(use && use.name === "get_weather" && typeof use.input.city === "string", `tool_use ${json(first.content)}`);
check(use.id.startsWith("toolu_"), `tool_use id ${use.id}`);
const turn2 = [
  { role: "user", content: "Weather in Paris?" },
  { role: "assistant", content: first.content },
  { role: "user", content: [{ type: "tool_result", tool_use_id: use.id, content: "21 C, sunny" }] },
];
const second = await client.messages.create({ model, max_tokens: 6, temperature: 0, tools, messages: turn2 });
check(second.type === "message" && second.stop_reason !== null, `second turn ${json(second)}`);
check(inputOf(second.usage) > inputOf(first.usage), "the second turn's prompt holds the first");
const counted2 = await client.messages.countTokens({ model, tools, messages: turn2 });
check(counted2.input_tokens === inputOf(second.usage), `countTokens turn 2 ${counted2.input_tokens}`);

// Errors arrive as APIError with Anthropic's error type.
let refused = false;
try {
  await client.messages.create({ ...req, temperature: 3 });
} catch (e) {
  refused = e.status === 400 && e.error?.error?.type === "invalid_request_error" && String(e.message).includes("temperature");
}
check(refused, "temperature 3 must be a 400 invalid_request_error naming the field");
let unauthorized = false;
try {
  await new Anthropic({ baseURL, apiKey: "wrong", maxRetries: 0 }).messages.create(req);
} catch (e) {
  unauthorized = e instanceof Anthropic.AuthenticationError && e.status === 401;
}
check(unauthorized, "a wrong x-api-key must be a 401 AuthenticationError");

console.log(`OK: @anthropic-ai/sdk ${Anthropic.VERSION ?? ""} create, stream (${text.length} chars), stream helper, tools (2 turns), countTokens, errors`);
