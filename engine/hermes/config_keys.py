"""hermes-agent's config keys, kept as data (read from the real package).

Read from ``hermes_cli.config.DEFAULT_CONFIG`` of hermes-agent |version| (PyPI), plus
the ``kanban:`` keys its gateway and CLI read with ``kanban_cfg.get(...)`` that are not
in the defaults. To refresh: install the new version in a throwaway venv, print
``sorted(DEFAULT_CONFIG)`` and ``sorted(DEFAULT_CONFIG["kanban"])``, grep its sources
for ``kanban_cfg.get("``, and update the sets and the version below.
"""

from __future__ import annotations

HERMES_AGENT_VERSION = "0.19.0"

# Every top-level section of hermes-agent's config.yaml.
HERMES_SECTIONS: frozenset[str] = frozenset({
    "_config_version", "agent", "approvals", "auxiliary", "bedrock", "browser", "checkpoints",
    "code_execution", "command_allowlist", "compression", "computer_use", "context",
    "context_file_max_chars", "credential_pool_strategies", "cron", "curator", "dashboard",
    "delegation", "desktop", "discord", "display", "fallback_providers", "file_read_max_chars",
    "gateway", "goals", "honcho", "hooks", "hooks_auto_accept", "human_delay", "kanban", "logging",
    "lsp", "matrix", "mattermost", "max_concurrent_sessions", "max_live_sessions", "mcp",
    "mcp_discovery_timeout", "memory", "moa", "model", "model_catalog", "network", "onboarding",
    "openrouter", "paste_collapse_char_threshold", "paste_collapse_threshold",
    "paste_collapse_threshold_fallback", "personalities", "platform_hints", "prefill_messages_file",
    "privacy", "prompt_caching", "providers", "quick_commands", "secrets", "security", "sessions",
    "skills", "slack", "streaming", "stt", "telegram", "terminal", "timezone", "tool_loop_guardrails",
    "tool_output", "tools", "toolsets", "tts", "updates", "vertex", "voice", "web", "whatsapp",
    "x_search",
})

# Keys hermes-agent defines inside ``kanban:`` (defaults and keys its code reads).
HERMES_KANBAN_KEYS: frozenset[str] = frozenset({
    "auto_decompose", "auto_decompose_per_tick", "auto_promote_children", "auto_subscribe_on_create",
    "default_assignee", "diagnostics", "dispatch_in_gateway", "dispatch_interval_seconds",
    "dispatch_stale_timeout_seconds", "failure_limit", "max_in_progress", "max_in_progress_per_profile",
    "max_spawn", "orchestrator_profile", "worker_log_backup_count", "worker_log_rotate_bytes",
})
