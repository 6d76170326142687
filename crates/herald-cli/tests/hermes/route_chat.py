# Writes a gateway_routing entry into a Hermes home's state.db with Hermes's own code, as
# its gateway does when a Telegram DM from user 42 is in the oldest session; prints that
# session's id. Run with the Python that has hermes-agent 0.19.0.
import json, sqlite3, sys
from datetime import datetime
from pathlib import Path
from hermes_state import SessionDB
from gateway.session import SessionEntry
from gateway.config import Platform
home = Path(sys.argv[1])
db = SessionDB(home / "state.db")
first = sqlite3.connect(home / "state.db").execute("SELECT id FROM sessions ORDER BY started_at LIMIT 1").fetchone()[0]
key = "agent:main:telegram:dm:42"
now = datetime.now()
entry = SessionEntry(session_key=key, session_id=first, created_at=now, updated_at=now, platform=Platform.TELEGRAM, chat_type="dm")
db.save_gateway_routing_entry(key, json.dumps(entry.to_dict()), scope=str((home / "sessions").resolve()))
print(first)
