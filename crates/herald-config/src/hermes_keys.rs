//! The keys a Hermes `config.yaml` may hold (Hermes Agent 0.19's defaults), so that a
//! Hermes setting herald does not implement is told apart from a typo: the first is listed
//! once, at info level; the second gets the "unknown key, did you mean" warning.

/// Every top-level key of a Hermes config.
#[rustfmt::skip]
pub const HERMES_TOP_KEYS: &[&str] = &[
    "model", "providers", "fallback_providers", "credential_pool_strategies", "toolsets",
    "max_concurrent_sessions", "max_live_sessions", "agent", "terminal", "web", "browser",
    "checkpoints", "context_file_max_chars", "file_read_max_chars", "mcp_discovery_timeout",
    "mcp", "tool_output", "tool_loop_guardrails", "compression", "kanban", "prompt_caching",
    "openrouter", "bedrock", "auxiliary", "display", "dashboard", "privacy", "tts", "stt",
    "voice", "human_delay", "context", "memory", "delegation", "prefill_messages_file",
    "goals", "moa", "skills", "curator", "honcho", "timezone", "slack", "discord", "whatsapp",
    "telegram", "mattermost", "matrix", "approvals", "command_allowlist", "quick_commands",
    "platform_hints", "hooks", "hooks_auto_accept", "personalities", "security", "cron",
    "code_execution", "tools", "logging", "model_catalog", "network", "gateway",
    "sessions", "onboarding", "updates", "lsp", "x_search", "secrets",
    "paste_collapse_threshold", "paste_collapse_threshold_fallback",
    "paste_collapse_char_threshold", "computer_use", "desktop", "vertex", "_config_version",
];

/// Keys of Hermes's `gateway:` block (herald reads only `platforms` and
/// `multiplex_profiles` there).
#[rustfmt::skip]
pub const HERMES_GATEWAY_KEYS: &[&str] = &[
    "delivery_ledger", "max_inbound_media_bytes",
    "message_timestamps", "platform_connect_timeout", "respawn_storm", "restart_loop_guard",
    "scale_to_zero", "strict", "trust_recent_files", "trust_recent_files_seconds",
    "write_sessions_json",
];

/// An agent section herald reads key by key.
pub struct Section {
    pub name: &'static str,
    /// The keys herald reads and uses.
    pub herald: &'static [&'static str],
    /// The keys Hermes knows that herald does not implement.
    pub hermes: &'static [&'static str],
}

/// The agent sections checked key by key; other agent sections (`model`, `providers`,
/// ...) are read as written.
#[rustfmt::skip]
pub const SECTIONS: &[Section] = &[
    Section {
        name: "agent",
        herald: &["max_turns", "api_max_retries", "disabled_toolsets", "max_tool_calls_per_answer"],
        hermes: &[
            "clarify_timeout", "coding_context", "coding_instructions", "environment_hint",
            "environment_probe", "gateway_auto_continue_freshness", "gateway_notify_interval",
            "gateway_timeout", "gateway_timeout_warning", "image_input_mode",
            "intent_ack_continuation", "local_stream_stale_timeout", "max_verify_nudges",
            "parallel_tool_call_guidance", "reasoning_overrides", "restart_drain_timeout",
            "service_tier", "task_completion_guidance", "tool_use_enforcement",
            "verify_guidance", "verify_on_stop",
        ],
    },
    Section {
        name: "terminal",
        herald: &["backend", "cwd", "timeout"],
        hermes: &[
            "auto_source_bashrc", "container_cpu", "container_disk", "container_memory",
            "container_persistent", "daemon_term_grace_seconds", "daytona_image", "docker_env",
            "docker_extra_args", "docker_forward_env", "docker_image",
            "docker_mount_cwd_to_workspace", "docker_network", "docker_run_as_host_user",
            "docker_volumes", "env_passthrough", "home_mode", "modal_image", "modal_mode",
            "persistent_shell", "shell_init_files", "singularity_image",
        ],
    },
    Section {
        name: "approvals",
        herald: &["mode", "timeout", "deny"],
        hermes: &[
            "cron_mode", "destructive_slash_confirm", "mcp_reload_confirm",
        ],
    },
    Section {
        name: "web",
        herald: &["backend", "searxng_url", "allow_private_urls"],
        hermes: &[
            "extract_backend", "extract_char_limit", "search_backend",
        ],
    },
    Section {
        name: "security",
        herald: &["allow_private_urls"],
        hermes: &[
            "acked_advisories", "allow_lazy_installs", "redact_secrets", "tirith_enabled",
            "tirith_fail_open", "tirith_path", "tirith_timeout", "website_blocklist",
        ],
    },
    Section {
        name: "skills",
        herald: &["external_dirs", "disabled", "platform_disabled"],
        hermes: &[
            "guard_agent_created", "inline_shell", "inline_shell_timeout", "template_vars",
            "write_approval",
        ],
    },
];
