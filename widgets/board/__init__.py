"""The kanban board pane: its card columns, modals, board switcher and worker log."""
