"""The hermes-tui engine: home, config, process identity, processes, the kanban board,
scratch and the attention list. Pure Python; never imports textual, rich, widgets or
hermes_tui."""
