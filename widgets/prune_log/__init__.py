"""The prune-log pane: what the pruner removed and why."""
