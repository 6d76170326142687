"""Drives `herald acp` with the official `agent-client-protocol` Python client.

Usage: python3 acp_client.py HERALD_BIN HOME CWD
The fake provider behind HOME answers: a text, then a terminal call (approved), then a
text. Then the session's mode and edit policy are set and it is forked. Exits non-zero with the reason when herald does not behave.
"""

import asyncio
import os
import sys

import acp
from acp.schema import AllowedOutcome, RequestPermissionResponse


class Recorder:
    def __init__(self):
        self.updates = []
        self.asked = []

    async def session_update(self, session_id, update, **kwargs):
        self.updates.append(update)

    async def request_permission(self, session_id, tool_call, options, **kwargs):
        self.asked.append([o.option_id for o in options])
        return RequestPermissionResponse(outcome=AllowedOutcome(option_id="allow_once", outcome="selected"))

    def text(self):
        return "".join(u.content.text for u in self.updates
                       if getattr(u, "session_update", "") == "agent_message_chunk")


async def main(binary, home, cwd):
    recorder = Recorder()
    env = dict(os.environ, HERALD_HOME=home, RUST_LOG="warn")
    async with acp.spawn_agent_process(recorder, binary, "acp", env=env) as (conn, _process):
        init = await conn.initialize(protocol_version=1)
        assert init.protocol_version == 1, init
        assert init.agent_info.name == "hermes-agent", init.agent_info
        assert init.agent_capabilities.load_session is True
        assert "hermes-setup" in [m.id for m in init.auth_methods], init.auth_methods
        session = await conn.new_session(cwd=cwd)
        done = await conn.prompt(session_id=session.session_id, prompt=[acp.text_block("hi")])
        assert done.stop_reason == "end_turn", done
        assert recorder.text() == "Hello.", recorder.text()
        done = await conn.prompt(session_id=session.session_id, prompt=[acp.text_block("clean up")])
        assert done.stop_reason == "end_turn", done
        kinds = [(u.session_update, getattr(u, "kind", None)) for u in recorder.updates
                 if u.session_update in ("tool_call", "tool_call_update")]
        assert kinds[0] == ("tool_call", "execute"), kinds
        assert kinds[-1][0] == "tool_call_update", kinds
        assert recorder.asked == [["allow_once", "allow_session", "allow_always", "deny", "deny_always"]], recorder.asked
        assert recorder.text().endswith("Removed."), recorder.text()
        assert not os.path.exists(os.path.join(cwd, "py-doomed.txt")), "the approved command ran"
        # Modes, config options and fork, as the client's own types read them.
        assert session.modes.current_mode_id == "default", session.modes
        assert [m.id for m in session.modes.available_modes] == ["default", "accept_edits", "dont_ask"]
        await conn.set_session_mode(session_id=session.session_id, mode_id="dont_ask")
        options = await conn.set_config_option(
            config_id="edit_approval_policy", session_id=session.session_id, value="workspace_session")
        ids = [o.root.id if hasattr(o, "root") else o.id for o in options.config_options]
        assert ids == ["edit_approval_policy", "model"], ids
        fork = await conn.fork_session(session_id=session.session_id, cwd=cwd)
        assert fork.session_id and fork.session_id != session.session_id, fork
    print("acp client ok")


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
