"""The hermes-tui engine: home, config, process identity, and (later) processes,
kanban and scratch. Pure Python; never imports textual, widgets or hermes_tui."""
