"""Drives herald's API with the official `openai` Python client.

Usage: openai_sdk.py BASE_URL KEY. Prints one line per check and exits non-zero on the
first failure (the Rust test reads the output)."""

import sys

import openai
from openai import OpenAI


def main() -> int:
    base, key = sys.argv[1], sys.argv[2]
    client = OpenAI(base_url=f"{base}/v1", api_key=key, max_retries=0)

    models = client.models.list()
    assert models.data[0].id == "hermes-agent", models
    print("models ok")

    answer = client.chat.completions.create(
        model="hermes-agent", messages=[{"role": "user", "content": "hi"}]
    )
    assert answer.choices[0].message.content == "Hello from herald.", answer
    assert answer.choices[0].finish_reason == "stop"
    print("chat ok")

    text = ""
    for chunk in client.chat.completions.create(
        model="hermes-agent", stream=True, messages=[{"role": "user", "content": "stream"}]
    ):
        if chunk.choices:
            text += chunk.choices[0].delta.content or ""
    assert text == "Streamed answer.", text
    print("stream ok")

    bad = OpenAI(base_url=f"{base}/v1", api_key="wrong-key", max_retries=0)
    try:
        bad.models.list()
        raise AssertionError("a wrong key was accepted")
    except openai.AuthenticationError as e:
        assert e.status_code == 401 and e.code == "invalid_api_key", e
    print("auth error ok")

    try:
        client.chat.completions.create(model="hermes-agent", messages=[])
        raise AssertionError("empty messages were accepted")
    except openai.BadRequestError as e:
        assert e.status_code == 400, e
    print("bad request ok")

    first = client.responses.create(model="hermes-agent", input="remember 42", instructions="Be brief.")
    assert first.output_text == "Noted.", first
    assert first.status == "completed" and first.id.startswith("resp_"), first
    second = client.responses.create(model="hermes-agent", input="what number?", previous_response_id=first.id)
    assert second.output_text == "42.", second
    assert client.responses.retrieve(second.id).id == second.id
    print("responses ok")

    with client.responses.stream(model="hermes-agent", input="stream it", previous_response_id=second.id) as stream:
        deltas = "".join(e.delta for e in stream if e.type == "response.output_text.delta")
        final = stream.get_final_response()
    assert deltas == "Streamed response." and final.output_text == "Streamed response.", (deltas, final)
    print("responses stream ok")

    client.responses.delete(first.id)
    try:
        client.responses.retrieve(first.id)
        raise AssertionError("a deleted response was found")
    except openai.NotFoundError:
        pass
    try:
        client.responses.create(model="hermes-agent", input="x", previous_response_id="resp_nope")
        raise AssertionError("an unknown previous response was accepted")
    except openai.NotFoundError:
        pass
    print("responses delete ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
