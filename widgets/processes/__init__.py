"""The processes pane: its table, output view and grouped toasts."""
