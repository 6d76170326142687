"""Logs as atbash-hermes-plugin does when its guard cannot start: an ERROR record (and
an INFO one herald keeps at DEBUG)."""

import logging

log = logging.getLogger("loud.guard")


def register(ctx):
    log.info("starting the guard")
    log.error("guard initialization failed; pre_tool_call remains fail-closed")
