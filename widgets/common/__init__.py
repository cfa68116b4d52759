"""Pieces shared by several panes: the pane base, fitted tables, dialogs, help, command bar and footer."""
