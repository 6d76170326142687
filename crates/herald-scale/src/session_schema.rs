//! The session store's tables on PostgreSQL: Hermes's `state.db` columns, with a
//! per-session sequence (`seq`) that orders a session's messages (its writes are one
//! instance's at a time; a global id's order is not commit order), stable row ids for
//! clients, and the instances' heartbeats that tell whose runs are orphaned.

use crate::migrate::Migrations;

pub(crate) const SESSIONS: Migrations = Migrations {
    list: LIST,
    table: "herald_sessions_schema",
};

const LIST: &[&str] = &[
    // 1: sessions, messages, runs, stored responses, instances.
    "CREATE TABLE sessions (
        id TEXT PRIMARY KEY,
        source TEXT,
        user_id TEXT,
        session_key TEXT,
        chat_id TEXT,
        display_name TEXT,
        model TEXT,
        model_config TEXT,
        system_prompt TEXT,
        parent_session_id TEXT REFERENCES sessions(id),
        started_at DOUBLE PRECISION NOT NULL,
        ended_at DOUBLE PRECISION,
        end_reason TEXT,
        message_count BIGINT NOT NULL DEFAULT 0,
        tool_call_count BIGINT NOT NULL DEFAULT 0,
        input_tokens BIGINT NOT NULL DEFAULT 0,
        output_tokens BIGINT NOT NULL DEFAULT 0,
        cwd TEXT,
        title TEXT,
        api_call_count BIGINT NOT NULL DEFAULT 0,
        profile_name TEXT,
        rewind_count BIGINT NOT NULL DEFAULT 0,
        archived BIGINT NOT NULL DEFAULT 0,
        n BIGSERIAL
    );
    CREATE INDEX idx_sessions_source ON sessions (source, started_at);
    CREATE INDEX idx_sessions_started ON sessions (started_at, n);
    CREATE INDEX idx_sessions_title ON sessions (title);
    CREATE TABLE messages (
        id BIGSERIAL PRIMARY KEY,
        session_id TEXT NOT NULL REFERENCES sessions(id),
        seq BIGINT NOT NULL,
        role TEXT NOT NULL,
        content TEXT,
        tool_call_id TEXT,
        tool_calls TEXT,
        tool_name TEXT,
        timestamp DOUBLE PRECISION NOT NULL,
        token_count BIGINT,
        finish_reason TEXT,
        reasoning TEXT,
        active BIGINT NOT NULL DEFAULT 1,
        compacted BIGINT NOT NULL DEFAULT 0,
        api_content TEXT,
        UNIQUE (session_id, seq)
    );
    CREATE INDEX idx_messages_live ON messages (session_id, active, seq);
    CREATE TABLE herald_runs (
        id TEXT PRIMARY KEY,
        session_id TEXT NOT NULL,
        status TEXT NOT NULL,
        model TEXT NOT NULL,
        created_at DOUBLE PRECISION NOT NULL,
        updated_at DOUBLE PRECISION NOT NULL,
        last_event TEXT,
        output TEXT,
        error TEXT,
        pending_steer TEXT,
        input_tokens BIGINT NOT NULL DEFAULT 0,
        output_tokens BIGINT NOT NULL DEFAULT 0,
        owner TEXT
    );
    CREATE INDEX idx_herald_runs_unfinished ON herald_runs (owner)
        WHERE status NOT IN ('completed', 'failed', 'cancelled');
    CREATE TABLE herald_responses (
        id TEXT PRIMARY KEY,
        conversation TEXT,
        session_id TEXT NOT NULL,
        instructions TEXT,
        history TEXT NOT NULL,
        response TEXT NOT NULL,
        created_at DOUBLE PRECISION NOT NULL,
        used_at DOUBLE PRECISION NOT NULL,
        n BIGSERIAL
    );
    CREATE INDEX idx_herald_responses_used ON herald_responses (used_at, n);
    CREATE INDEX idx_herald_responses_conversation ON herald_responses (conversation, created_at, n);
    CREATE TABLE herald_instances (
        owner TEXT PRIMARY KEY,
        alive_until_ms BIGINT NOT NULL
    );",
    // 2: one turn at a time per session across instances: a lease per held session.
    "CREATE TABLE herald_session_holds (
        session_id TEXT PRIMARY KEY,
        owner TEXT NOT NULL,
        until_ms BIGINT NOT NULL
    );",
    // 3: `Idempotency-Key`s of the API, shared: who makes the answer, then the answer.
    "CREATE TABLE herald_idempotency (
        key TEXT PRIMARY KEY,
        fingerprint TEXT NOT NULL,
        created_at_ms BIGINT NOT NULL,
        owner TEXT NOT NULL,
        status INTEGER,
        headers TEXT,
        body BYTEA
    );
    CREATE INDEX idx_herald_idempotency_created ON herald_idempotency (created_at_ms);",
    // 4: a chat platform's conversation is found by its session key, newest first.
    "CREATE INDEX idx_sessions_session_key ON sessions (session_key, started_at);",
    // The messages' search index (`session_search`).
    "CREATE INDEX idx_messages_search ON messages USING gin (to_tsvector('simple', coalesce(content, '')));",
];
