"""Drives herald's OpenAI-compatible API with real agent frameworks: openai-agents,
pydantic-ai, litellm and Simon Willison's llm, each as its users call it.

Usage: frameworks.py CLIENT BASE_URL KEY
  CLIENT: agents-responses, agents-chat, pydantic-chat, pydantic-responses, litellm, llm
          or openai-failure. BASE_URL: http://127.0.0.1:PORT (the API is at BASE_URL/v1).

Each client runs the flows below in this order, printing `<flow> ok` after each, and
exits non-zero with a message naming the flow on the first failure:
  plain        "hi" -> "Hello."
  stream       streamed, "stream" -> "Streamed answer."
  multi        "remember 42" -> "Noted.", then (history carried the library's way)
               "what number?" -> "42."
  server-tool  streamed, "read the file" -> "The file says hello.": herald runs its own
               tool; the library must take its report of it without failing
  client-tool  the client's own get_weather(city) tool, called by the model with
               {"city": "Paris"}, run once by the library, -> "It is sunny in Paris."
Client-side retries are off (max_retries=0 everywhere) except in `openai-failure`: the
openai SDK with its default max_retries=2 sends "hi" and must get an APIStatusError
(`failure ok status=<code>`); the Rust test counts what reached the provider.
Lines starting with `  info:` tell what a library exposed (herald's own tool calls).
HERALD_FRAMEWORK_FLOWS=client-tool (a comma list) runs only those flows, for a look by hand.
The frameworks come from target/frameworks-venv (scripts/test installs them).
"""

import asyncio
import json
import os
import sys
import tempfile
import traceback

# No proxy between the client and herald, whatever the environment says.
for _v in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
    os.environ.pop(_v, None)
os.environ["NO_PROXY"] = os.environ["no_proxy"] = "*"
# litellm fetches its model price map from the network at import unless told not to.
os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
# openai-agents exports traces to OpenAI's platform unless this is set.
os.environ["OPENAI_AGENTS_DISABLE_TRACING"] = "1"

MODEL = "hermes-agent"
FLOWS = ["plain", "stream", "multi", "server-tool", "client-tool"]


class Failure(Exception):
    pass


def expect(what, got, want):
    if got != want:
        raise Failure(f"{what}: expected {want!r}, got {got!r}")


def info(text):
    print(f"  info: {text}", flush=True)


# The client's own tool, and each call of it.
WEATHER_CALLS = []


def get_weather(city: str) -> str:
    """Get the current weather in a city."""
    WEATHER_CALLS.append(city)
    return f"sunny in {city}"


def expect_weather_ran():
    expect("get_weather calls", WEATHER_CALLS, ["Paris"])


WEATHER_SCHEMA = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}


# ---------------------------------------------------------------- openai-agents


def agents_flows(base, key, api):
    from agents import (
        Agent,
        ModelRetrySettings,
        ModelSettings,
        OpenAIChatCompletionsModel,
        OpenAIResponsesModel,
        Runner,
        function_tool,
        set_tracing_disabled,
    )
    from openai import AsyncOpenAI

    set_tracing_disabled(True)
    client = AsyncOpenAI(base_url=f"{base}/v1", api_key=key, max_retries=0)
    if api == "responses":
        model = OpenAIResponsesModel(model=MODEL, openai_client=client)
    else:
        model = OpenAIChatCompletionsModel(model=MODEL, openai_client=client)
    # No runner-managed retries either (they are off unless asked for; said here).
    settings = ModelSettings(retry=ModelRetrySettings(max_retries=0))
    agent = Agent(name="herald-test", model=model, model_settings=settings)

    def tool_items(result):
        for item in result.new_items:
            if item.type in ("tool_call_item", "tool_call_output_item"):
                raw = item.raw_item
                kind = raw.get("type") if isinstance(raw, dict) else getattr(raw, "type", None)
                name = raw.get("name") if isinstance(raw, dict) else getattr(raw, "name", None)
                yield item.type, kind, name, raw

    async def plain():
        r = await Runner.run(agent, "hi")
        expect("final_output", r.final_output, "Hello.")

    async def stream():
        r = Runner.run_streamed(agent, "stream")
        text = ""
        async for e in r.stream_events():
            if e.type == "raw_response_event" and e.data.type == "response.output_text.delta":
                text += e.data.delta
        expect("streamed deltas", text, "Streamed answer.")
        expect("final_output", r.final_output, "Streamed answer.")

    async def multi():
        first = await Runner.run(agent, "remember 42")
        expect("first turn", first.final_output, "Noted.")
        history = first.to_input_list() + [{"role": "user", "content": "what number?"}]
        second = await Runner.run(agent, history)
        expect("second turn", second.final_output, "42.")

    async def server_tool():
        r = Runner.run_streamed(agent, "read the file")
        async for e in r.stream_events():
            if e.type == "run_item_stream_event" and e.name in ("tool_called", "tool_output"):
                info(f"stream event {e.name}: {e.item.type}")
        expect("final_output", r.final_output, "The file says hello.")
        seen = list(tool_items(r))
        for item_type, kind, name, raw in seen:
            info(f"{item_type} {kind} name={name}: {raw!r}"[:400])
        if not seen:
            info("no tool items exposed")

    async def client_tool():
        tool = function_tool(get_weather)
        with_tool = agent.clone(tools=[tool])
        r = await Runner.run(with_tool, "weather in Paris?", max_turns=4)
        expect("final_output", r.final_output, "It is sunny in Paris.")
        expect_weather_ran()

    return {"plain": plain, "stream": stream, "multi": multi,
            "server-tool": server_tool, "client-tool": client_tool}


# ------------------------------------------------------------------ pydantic-ai


def pydantic_flows(base, key, api):
    from openai import AsyncOpenAI
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel, OpenAIResponsesModel
    from pydantic_ai.providers.openai import OpenAIProvider

    client = AsyncOpenAI(base_url=f"{base}/v1", api_key=key, max_retries=0)
    provider = OpenAIProvider(openai_client=client)
    if api == "responses":
        model = OpenAIResponsesModel(MODEL, provider=provider)
    else:
        model = OpenAIChatModel(MODEL, provider=provider)
    settings = {"max_retries": 0}
    agent = Agent(model, model_settings=settings)

    def show_parts(messages):
        shown = False
        for m in messages:
            for p in m.parts:
                if "Tool" in type(p).__name__:
                    shown = True
                    info(f"{type(p).__name__}: {p!r}"[:400])
        if not shown:
            info("no tool parts exposed")

    async def plain():
        r = await agent.run("hi")
        expect("output", r.output, "Hello.")

    async def stream():
        text = ""
        async with agent.run_stream("stream") as r:
            async for delta in r.stream_text(delta=True):
                text += delta
        expect("streamed deltas", text, "Streamed answer.")

    async def multi():
        first = await agent.run("remember 42")
        expect("first turn", first.output, "Noted.")
        second = await agent.run("what number?", message_history=first.all_messages())
        expect("second turn", second.output, "42.")

    async def server_tool():
        # run_stream_events runs the whole agent loop (run_stream would stop at the
        # first text, before acting on the tool calls of the same response).
        from pydantic_ai import AgentRunResultEvent

        result = None
        async with agent.run_stream_events("read the file") as events:
            async for e in events:
                if isinstance(e, AgentRunResultEvent):
                    result = e.result
                elif "Tool" in type(e).__name__ or "Tool" in type(getattr(e, "part", None)).__name__:
                    info(f"event {e!r}"[:300])
        if result is None:
            raise Failure("the run ended without a result")
        expect("output", result.output, "The file says hello.")
        show_parts(result.all_messages())

    async def client_tool():
        with_tool = Agent(model, model_settings=settings)
        with_tool.tool_plain(get_weather)
        r = await with_tool.run("weather in Paris?")
        expect("output", r.output, "It is sunny in Paris.")
        expect_weather_ran()

    return {"plain": plain, "stream": stream, "multi": multi,
            "server-tool": server_tool, "client-tool": client_tool}


# ---------------------------------------------------------------------- litellm


def litellm_flows(base, key):
    import litellm

    litellm.num_retries = None
    # `openai/` routes to litellm's OpenAI-compatible handler (the openai SDK);
    # max_retries goes to the SDK client, num_retries is litellm's own retry wrapper.
    kw = dict(model=f"openai/{MODEL}", api_base=f"{base}/v1", api_key=key,
              max_retries=0, num_retries=0)

    def streamed(messages, **extra):
        text = ""
        for chunk in litellm.completion(messages=messages, stream=True, **kw, **extra):
            if chunk.choices and chunk.choices[0].delta.content:
                text += chunk.choices[0].delta.content
        return text

    async def plain():
        r = litellm.completion(messages=[{"role": "user", "content": "hi"}], **kw)
        expect("content", r.choices[0].message.content, "Hello.")

    async def stream():
        expect("streamed deltas", streamed([{"role": "user", "content": "stream"}]), "Streamed answer.")

    async def multi():
        messages = [{"role": "user", "content": "remember 42"}]
        r = litellm.completion(messages=messages, **kw)
        expect("first turn", r.choices[0].message.content, "Noted.")
        messages += [{"role": "assistant", "content": r.choices[0].message.content},
                     {"role": "user", "content": "what number?"}]
        r = litellm.completion(messages=messages, **kw)
        expect("second turn", r.choices[0].message.content, "42.")

    async def server_tool():
        text = streamed([{"role": "user", "content": "read the file"}])
        expect("streamed deltas", text, "The file says hello.")

    async def client_tool():
        messages = [{"role": "user", "content": "weather in Paris?"}]
        r = litellm.completion(messages=messages, tools=[WEATHER_SCHEMA], **kw)
        choice = r.choices[0]
        calls = choice.message.tool_calls or []
        if not calls:
            raise Failure(f"expected a get_weather tool call, got finish_reason={choice.finish_reason!r} "
                          f"content={choice.message.content!r}")
        expect("finish_reason", choice.finish_reason, "tool_calls")
        messages.append(choice.message.model_dump(exclude_none=True))
        for call in calls:
            expect("tool name", call.function.name, "get_weather")
            result = get_weather(**json.loads(call.function.arguments))
            messages.append({"role": "tool", "tool_call_id": call.id, "name": call.function.name,
                             "content": result})
        r = litellm.completion(messages=messages, tools=[WEATHER_SCHEMA], **kw)
        expect("content", r.choices[0].message.content, "It is sunny in Paris.")
        expect_weather_ran()

    return {"plain": plain, "stream": stream, "multi": multi,
            "server-tool": server_tool, "client-tool": client_tool}


# -------------------------------------------------------------------------- llm


def llm_flows(base, key):
    # llm reads extra-openai-models.yaml from its user folder: a throwaway one here.
    home = tempfile.mkdtemp(prefix="llm-user-")
    os.environ["LLM_USER_PATH"] = home
    with open(os.path.join(home, "extra-openai-models.yaml"), "w") as f:
        f.write(
            "- model_id: herald\n"
            f"  model_name: {MODEL}\n"
            f"  api_base: {base}/v1\n"
            "  api_key_name: herald\n"
            "  supports_tools: true\n"
        )
    import llm

    model = llm.get_model("herald")
    model.key = key
    # llm makes its openai client with the SDK's default max_retries=2 and has no
    # setting for it: the client it makes is wrapped to retry nothing.
    make_client = model.get_client
    model.get_client = lambda k, *, async_=False: make_client(k, async_=async_).with_options(max_retries=0)

    async def plain():
        expect("text", model.prompt("hi", stream=False).text(), "Hello.")

    async def stream():
        expect("streamed chunks", "".join(model.prompt("stream", stream=True)), "Streamed answer.")

    async def multi():
        conversation = model.conversation()
        expect("first turn", conversation.prompt("remember 42", stream=False).text(), "Noted.")
        expect("second turn", conversation.prompt("what number?", stream=False).text(), "42.")

    async def server_tool():
        r = model.prompt("read the file", stream=True)
        expect("streamed chunks", "".join(r), "The file says hello.")
        calls = r.tool_calls()
        info(f"tool_calls(): {calls!r}"[:400] if calls else "no tool calls exposed")

    async def client_tool():
        chain = model.chain("weather in Paris?", tools=[get_weather], stream=False)
        expect("text", chain.text(), "It is sunny in Paris.")
        expect_weather_ran()

    return {"plain": plain, "stream": stream, "multi": multi,
            "server-tool": server_tool, "client-tool": client_tool}


# --------------------------------------------------------------- openai-failure


def failure_flow(base, key):
    import openai
    from openai import OpenAI

    client = OpenAI(base_url=f"{base}/v1", api_key=key, max_retries=2)
    try:
        answer = client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "hi"}]
        )
    except openai.APIStatusError as e:
        print(f"failure ok status={e.status_code}", flush=True)
        return 0
    except openai.APIError as e:
        print(f"failure: expected an APIStatusError, got {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    print(f"failure: expected an APIStatusError, got an answer: {answer!r}", file=sys.stderr)
    return 1


def main() -> int:
    if len(sys.argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    which, base, key = sys.argv[1], sys.argv[2].rstrip("/"), sys.argv[3]
    if which == "openai-failure":
        return failure_flow(base, key)
    makers = {
        "agents-responses": lambda: agents_flows(base, key, "responses"),
        "agents-chat": lambda: agents_flows(base, key, "chat"),
        "pydantic-chat": lambda: pydantic_flows(base, key, "chat"),
        "pydantic-responses": lambda: pydantic_flows(base, key, "responses"),
        "litellm": lambda: litellm_flows(base, key),
        "llm": lambda: llm_flows(base, key),
    }
    if which not in makers:
        print(f"unknown client {which!r}; one of {', '.join(makers)}, openai-failure", file=sys.stderr)
        return 2
    flows = makers[which]()

    # One event loop for all the flows: the async clients keep their connections.
    # HERALD_FRAMEWORK_FLOWS=a,b runs only those flows (to look at one by hand).
    only = [f for f in os.environ.get("HERALD_FRAMEWORK_FLOWS", "").split(",") if f]

    async def run_all() -> int:
        for name in [f for f in FLOWS if not only or f in only]:
            try:
                await flows[name]()
            except Exception as e:  # noqa: BLE001: any failure ends the run, named
                traceback.print_exc()
                print(f"{name} FAILED ({which}): {type(e).__name__}: {e}", file=sys.stderr, flush=True)
                return 1
            print(f"{name} ok", flush=True)
        return 0

    return asyncio.run(run_all())


if __name__ == "__main__":
    sys.exit(main())
