// Drives herald's OpenAI-compatible API with the Vercel AI SDK (`ai`), as its users
// call it: the chat model of @ai-sdk/openai-compatible by default; `responses` as a
// third argument takes @ai-sdk/openai's Responses model instead.
//
// Usage: NODE_PATH=target/test-cache/clients/node_modules node frameworks.mjs BASE_URL KEY [chat|responses]
//   (HERALD_CLIENT_NODE_MODULES is looked at when NODE_PATH is unset.)
// Runs, in this order, printing `<flow> ok` after each and exiting non-zero with a
// message naming the flow on the first failure:
//   plain        generateText "hi" -> "Hello."
//   stream       streamText "stream" -> "Streamed answer.", no error (or tool-error) part
//                in the stream
//   multi        "remember 42" -> "Noted.", then the response's messages and
//                "what number?" -> "42."
//   server-tool  streamText "read the file" -> "The file says hello." (herald runs its own
//                tool), no error or tool-error part in the stream
//   client-tool  the client's own get_weather tool ({city}), called by the model with
//                {"city": "Paris"}, run once by the SDK over steps -> "It is sunny in Paris."
// maxRetries: 0 on every call. Lines starting with `  info:` tell what the SDK exposed.
// HERALD_FRAMEWORK_FLOWS=a,b runs only those flows (to look at one by hand).

import { createRequire } from 'node:module';
import path from 'node:path';

const modules = (process.env.NODE_PATH || process.env.HERALD_CLIENT_NODE_MODULES || '')
  .split(path.delimiter)
  .filter(Boolean)[0];
if (!modules) {
  console.error('frameworks.mjs: set NODE_PATH to the node_modules scripts/test installs (target/test-cache/clients/node_modules)');
  process.exit(2);
}
// ES modules do not look at NODE_PATH: the packages are required from there.
const require = createRequire(path.join(path.resolve(modules), 'frameworks.cjs'));
const { generateText, streamText, tool, stepCountIs } = require('ai');
const { createOpenAICompatible } = require('@ai-sdk/openai-compatible');
const { createOpenAI } = require('@ai-sdk/openai');
const { z } = require('zod');

const [base, key, api = 'chat'] = process.argv.slice(2);
if (!base || !key || !['chat', 'responses'].includes(api)) {
  console.error('usage: node frameworks.mjs BASE_URL KEY [chat|responses]');
  process.exit(2);
}
const baseURL = `${base.replace(/\/$/, '')}/v1`;
const MODEL = 'hermes-agent';
const model =
  api === 'chat'
    ? createOpenAICompatible({ name: 'herald', baseURL, apiKey: key }).chatModel(MODEL)
    : createOpenAI({ baseURL, apiKey: key }).responses(MODEL);

class Failure extends Error {}

function expect(what, got, want) {
  const same = JSON.stringify(got) === JSON.stringify(want);
  if (!same) throw new Failure(`${what}: expected ${JSON.stringify(want)}, got ${JSON.stringify(got)}`);
}

function info(text) {
  console.log(`  info: ${text}`.slice(0, 400));
}

// Streams `prompt`; the text, and every `error` part of the stream (a chunk the SDK
// could not take) and `tool-error` part (a tool call it could not run: one of herald's
// own tools taken for the client's).
async function streamed(prompt) {
  const errors = [];
  // onError would only print the error parts again.
  const result = streamText({ model, prompt, maxRetries: 0, onError: () => {} });
  let text = '';
  for await (const part of result.fullStream) {
    if (part.type === 'text-delta') text += part.text;
    else if (part.type === 'error') errors.push(part.error);
    else if (part.type === 'tool-error') errors.push(new Error(`tool-error ${part.toolName}: ${part.error}`));
    if (part.type.startsWith('tool-') && part.type !== 'tool-input-delta') {
      info(`stream part ${JSON.stringify(part)}`);
    }
  }
  return { text, errors, result };
}

function expectNoErrors(errors) {
  if (errors.length) {
    const shown = errors.map((e) => (e && e.message) || String(e));
    throw new Failure(`the stream had ${errors.length} error part(s): ${shown.join(' | ')}`);
  }
}

const weatherCalls = [];

const flows = {
  async plain() {
    const r = await generateText({ model, prompt: 'hi', maxRetries: 0 });
    expect('text', r.text, 'Hello.');
  },

  async stream() {
    const { text, errors } = await streamed('stream');
    expectNoErrors(errors);
    expect('streamed text', text, 'Streamed answer.');
  },

  async multi() {
    const messages = [{ role: 'user', content: 'remember 42' }];
    const first = await generateText({ model, messages, maxRetries: 0 });
    expect('first turn', first.text, 'Noted.');
    messages.push(...first.response.messages, { role: 'user', content: 'what number?' });
    const second = await generateText({ model, messages, maxRetries: 0 });
    expect('second turn', second.text, '42.');
  },

  async 'server-tool'() {
    const { text, errors, result } = await streamed('read the file');
    expectNoErrors(errors);
    expect('streamed text', text, 'The file says hello.');
    const steps = await result.steps;
    for (const s of steps) {
      for (const c of s.toolCalls) info(`step tool call ${JSON.stringify(c)}`);
      for (const c of s.toolResults) info(`step tool result ${JSON.stringify(c)}`);
    }
  },

  async 'client-tool'() {
    const getWeather = tool({
      description: 'Get the current weather in a city.',
      inputSchema: z.object({ city: z.string() }),
      execute: async ({ city }) => {
        weatherCalls.push(city);
        return `sunny in ${city}`;
      },
    });
    const r = await generateText({
      model,
      prompt: 'weather in Paris?',
      tools: { get_weather: getWeather },
      stopWhen: stepCountIs(3),
      maxRetries: 0,
    });
    expect('text', r.text, 'It is sunny in Paris.');
    expect('get_weather calls', weatherCalls, ['Paris']);
  },
};

const only = (process.env.HERALD_FRAMEWORK_FLOWS || '').split(',').filter(Boolean);
for (const name of ['plain', 'stream', 'multi', 'server-tool', 'client-tool']) {
  if (only.length && !only.includes(name)) continue;
  try {
    await flows[name]();
  } catch (e) {
    console.error(e && e.stack ? e.stack : e);
    if (e && e.responseBody) console.error(`response body: ${e.responseBody}`);
    console.error(`${name} FAILED (vercel-ai ${api}): ${(e && e.name) || 'Error'}: ${(e && e.message) || e}`);
    process.exit(1);
  }
  console.log(`${name} ok`);
}
